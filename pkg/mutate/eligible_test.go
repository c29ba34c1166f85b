package mutate

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// A pool qualifies only where the pod may run on one of its nodes: its own
// nodeSelector, its required node affinity (a DaemonSet pod's matchFields on
// metadata.name included) and its spec.nodeName. Before, such a pod was
// pinned to a pool none of whose nodes it could run on.
func TestPoolsThePodCannotRunOnAreSkipped(t *testing.T) {
	t4 := gpuNode("t4w-0", "Tesla-T4", map[string]string{"accelerator": "nvidia-tesla-t4", inventory.LabelCount: "4"}, map[string]int64{"nvidia.com/gpu": 4})
	p100 := gpuNode("p100w-0", "Tesla-P100-PCIE-16GB", map[string]string{"accelerator": "nvidia-tesla-p100", inventory.LabelCount: "4"}, map[string]int64{"nvidia.com/gpu": 4})
	onNode := func(name string) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
				{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{name}}}}}}}}
	}
	tests := map[string]struct {
		edit     func(*corev1.Pod)
		wantNode string // the product the pod is pinned to, or "" for a denial
		wantMsg  string
	}{
		"the pod's nodeSelector picks the P100 pool":     {edit: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"accelerator": "nvidia-tesla-p100"} }, wantNode: "Tesla-P100-PCIE-16GB"},
		"the pod's nodeSelector picks the T4 pool":       {edit: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"accelerator": "nvidia-tesla-t4"} }, wantNode: "Tesla-T4"},
		"a DaemonSet pod's node affinity picks its node": {edit: func(p *corev1.Pod) { p.Spec.Affinity = onNode("p100w-0") }, wantNode: "Tesla-P100-PCIE-16GB"},
		"spec.nodeName picks its node's pool":            {edit: func(p *corev1.Pod) { p.Spec.NodeName = "t4w-0" }, wantNode: "Tesla-T4"},
		"a node in no pool is a denial that says why": {edit: func(p *corev1.Pod) { p.Spec.NodeName = "cpu-0" },
			wantMsg: "bound to node cpu-0 (spec.nodeName), which is not one of its 1 nodes"},
		"a selector no GPU node has is a denial": {edit: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"accelerator": "nvidia-a100"} },
			wantMsg: "none of its 1 nodes satisfies the pod's own nodeSelector"},
	}
	m := mutator(t4, p100)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := pod("p", map[string]string{"nvidia.com/gpu": "1"})
			tc.edit(p)
			res := mustMutate(t, m, p)
			if tc.wantMsg != "" {
				if res.Allowed || !strings.Contains(res.Message, tc.wantMsg) {
					t.Fatalf("allowed %v, message %q; want a denial naming %q", res.Allowed, res.Message, tc.wantMsg)
				}
				return
			}
			if !res.Allowed {
				t.Fatalf("denied: %s", res.Message)
			}
			if got := res.Pod.Spec.NodeSelector[inventory.LabelProduct]; got != tc.wantNode {
				t.Errorf("pinned to %q, want %q", got, tc.wantNode)
			}
		})
	}
}

func TestMirrorPodsAreLeftAlone(t *testing.T) {
	p := pod("static-gpu", map[string]string{"nvidia.com/gpumem": "3000"})
	p.Spec.NodeName = "h100"
	p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "abc"}
	res := mustMutate(t, mutator(h100Mixed), p)
	if !res.Allowed || len(res.Patch) != 0 {
		t.Errorf("a mirror pod: allowed %v, patch %v; want it admitted unchanged", res.Allowed, res.Patch)
	}
}
