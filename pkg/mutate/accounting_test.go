package mutate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// advertising returns the node with the accounting capacity its GPU
// resources add up to, as `gpuadmit capacity` or the agent would set it.
func advertising(n corev1.Node) corev1.Node {
	n = *n.DeepCopy()
	inv := inventory.Build([]corev1.Node{n}, nil)
	if len(inv.Pools) == 0 {
		return n
	}
	p := inv.Pools[0]
	for r, q := range p.NodeAccounting(p.Nodes[0]) {
		if n.Status.Allocatable == nil {
			n.Status.Allocatable = corev1.ResourceList{}
		}
		n.Status.Allocatable[corev1.ResourceName(r)] = *resourceQuantity(q)
	}
	return n
}

func TestAccountingResourcesCountRealMiB(t *testing.T) {
	h100Whole := gpuNode("h100w", "NVIDIA-H100-80GB-HBM3", map[string]string{inventory.LabelMemory: "81559", inventory.LabelCount: "8"}, map[string]int64{"nvidia.com/gpu": 8})
	tests := map[string]struct {
		node   corev1.Node
		limits map[string]string
		want   map[string]string
	}{
		"a 1g.20gb slice counts 20096 MiB": {advertising(h100Mixed), map[string]string{"gpuadmit.io/gpu-memory": "10Gi"},
			map[string]string{"nvidia.com/mig-1g.20gb": "1", "gpuadmit.io/gpu-memory-mib": "20096", "gpuadmit.io/h100-80gb-mib": "20096"}},
		"a 3 GiB share counts 3072 MiB": {advertising(t4Shared), map[string]string{"nvidia.com/gpumem": "3000"},
			map[string]string{"gpuadmit.io/gpu-mem": "3", "gpuadmit.io/gpu-memory-mib": "3072", "gpuadmit.io/t4-mib": "3072"}},
		"two whole H100s count 2 × 81559 MiB": {advertising(h100Whole), map[string]string{"nvidia.com/gpu": "2"},
			map[string]string{"nvidia.com/gpu": "2", "gpuadmit.io/gpu-memory-mib": "163118", "gpuadmit.io/h100-80gb-mib": "163118"}},
		"HAMi 2 GPUs × 2048 MiB on MIG counts the real slices": {advertising(h100Mixed), map[string]string{"nvidia.com/gpu": "2", "nvidia.com/gpumem": "2048"},
			map[string]string{"nvidia.com/mig-1g.10gb": "2", "gpuadmit.io/gpu-memory-mib": "19968", "gpuadmit.io/h100-80gb-mib": "19968"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := mutator(tc.node)
			res := mustMutate(t, m, pod("p", tc.limits))
			if !res.Allowed {
				t.Fatal(res.Message)
			}
			if diff := cmp.Diff(tc.want, accountingResources(res.Pod.Spec.Containers[0])); diff != "" {
				t.Errorf("resources (-want +got):\n%s", diff)
			}
			if again := mustMutate(t, m, res.Pod); !again.Allowed || len(again.Patch) != 0 {
				t.Errorf("deciding again: allowed %v, patch %v, %s", again.Allowed, again.Patch, again.Message)
			}
		})
	}
}

// Accounting fails closed. Before, one node without the accounting capacity
// turned accounting off for its whole pool, and pods admitted meanwhile were
// never counted by any quota.
func TestAccountingFailsClosed(t *testing.T) {
	bare := migNode("h100-bare", "NVIDIA-H100-80GB-HBM3", map[string]int64{"nvidia.com/mig-1g.20gb": 4})
	counted := advertising(bare)
	counted.Name = "h100-counted"
	limits := map[string]string{"gpuadmit.io/gpu-memory": "10Gi"}

	res := mustMutate(t, mutatorAsIs(counted, bare), pod("p", limits))
	if !res.Allowed {
		t.Fatalf("denied beside a node that advertises accounting: %s", res.Message)
	}
	if got := accountingResources(res.Pod.Spec.Containers[0])["gpuadmit.io/gpu-memory-mib"]; got != "20096" {
		t.Errorf("gpuadmit.io/gpu-memory-mib = %q, want 20096 although one node of the pool lacks the capacity", got)
	}

	res = mustMutate(t, mutatorAsIs(bare), pod("p", limits))
	if res.Allowed || !strings.Contains(res.Message, "advertises gpuadmit.io/gpu-memory-mib (every GPU pod") {
		t.Errorf("on nodes without accounting: allowed %v, %q; want a denial naming the missing capacity", res.Allowed, res.Message)
	}
}
