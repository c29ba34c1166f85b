package inventory_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

const offer8 = `{"resource":"gpuadmit.io/gpu-mem","unitMiB":10194,"sharesPerGPU":8}`

func withOffer(n corev1.Node, offer string) corev1.Node {
	n.Annotations = map[string]string{allocator.AnnotationShare: offer}
	return n
}

// The double-serving case: NVIDIA's device plugin serves an A100-80GB node's
// GPUs as nvidia.com/gpu and a share plugin serves them again as
// gpuadmit.io/gpu-mem. The old inventory called the node "shared" and kept
// it; now it is in no pool and the refusal says why.
func TestNodeServedByTwoPluginsIsRefused(t *testing.T) {
	nodes := exampleNodes(t)
	for i := range nodes {
		if nodes[i].Name == "a100-80g-0" {
			nodes[i].Status.Allocatable["gpuadmit.io/gpu-mem"] = resource.MustParse("632")
		}
	}
	inv := inventory.Build(nodes, nil)
	for _, p := range inv.Pools {
		for _, n := range p.Nodes {
			if n.Name == "a100-80g-0" {
				t.Errorf("pool %s (%s) holds a100-80g-0, which two device plugins serve", p.Name, p.Mode)
			}
		}
	}
	if len(inv.Refused) != 1 || inv.Refused[0].Node != "a100-80g-0" {
		t.Fatalf("Refused = %+v, want a100-80g-0 alone", inv.Refused)
	}
	for _, want := range []string{"nvidia.com/gpu=8", "gpuadmit.io/gpu-mem=632", "gpuadmit.io/node-mode=device-plugin"} {
		if !strings.Contains(inv.Refused[0].Reason, want) {
			t.Errorf("reason %q does not name %q", inv.Refused[0].Reason, want)
		}
	}
}

func TestShareOfferSetsThePool(t *testing.T) {
	tests := map[string]struct {
		nodes []corev1.Node
		want  map[string]poolView
		warn  []string
	}{
		"the agent's offer gives the resource, the share size and shares per GPU": {
			nodes: []corev1.Node{withOffer(node("h100-s-0", map[string]string{inventory.LabelProduct: h100}, map[string]string{"gpuadmit.io/gpu-mem": "64"}), offer8)},
			want: map[string]poolView{"h100-80gb-shared": {
				Model: "H100-80GB", Mode: inventory.Shared, Resource: "gpuadmit.io/gpu-mem", GPUMemoryMiB: 81559, UnitsPerGPU: 8,
				NodeSelector: map[string]string{inventory.LabelProduct: h100}, Allocatable: map[string]int64{"gpuadmit.io/gpu-mem": 64},
				Nodes: []string{"h100-s-0"},
			}},
		},
		"a resource of another name, as --resource sets it": {
			nodes: []corev1.Node{withOffer(node("h100-s-0", map[string]string{inventory.LabelProduct: h100}, map[string]string{"example.com/gpu-share": "32"}),
				`{"resource":"example.com/gpu-share","unitMiB":20389,"sharesPerGPU":4}`)},
			want: map[string]poolView{"h100-80gb-shared": {
				Model: "H100-80GB", Mode: inventory.Shared, Resource: "example.com/gpu-share", GPUMemoryMiB: 81559, UnitsPerGPU: 4,
				NodeSelector: map[string]string{inventory.LabelProduct: h100}, Allocatable: map[string]int64{"example.com/gpu-share": 32},
				Nodes: []string{"h100-s-0"},
			}},
		},
		"a node with another share size is not in the pool": {
			nodes: []corev1.Node{
				withOffer(node("h100-s-0", map[string]string{inventory.LabelProduct: h100}, map[string]string{"gpuadmit.io/gpu-mem": "64"}), offer8),
				withOffer(node("h100-s-1", map[string]string{inventory.LabelProduct: h100}, map[string]string{"gpuadmit.io/gpu-mem": "32"}),
					`{"resource":"gpuadmit.io/gpu-mem","unitMiB":20389,"sharesPerGPU":4}`),
			},
			want: map[string]poolView{"h100-80gb-shared": {
				Model: "H100-80GB", Mode: inventory.Shared, Resource: "gpuadmit.io/gpu-mem", GPUMemoryMiB: 81559, UnitsPerGPU: 8,
				NodeSelector: map[string]string{inventory.LabelProduct: h100}, Allocatable: map[string]int64{"gpuadmit.io/gpu-mem": 64},
				Nodes: []string{"h100-s-0"},
			}},
			warn: []string{"node h100-s-1 (NVIDIA-H100-80GB-HBM3, shared, 4 shares of 20389 MiB per GPU as gpuadmit.io/gpu-mem) disagrees"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			inv := inventory.Build(tc.nodes, nil)
			if diff := cmp.Diff(tc.want, view(inv)); diff != "" {
				t.Errorf("pools (-want +got):\n%s", diff)
			}
			checkWarnings(t, inv.Warnings, tc.warn)
		})
	}
}
