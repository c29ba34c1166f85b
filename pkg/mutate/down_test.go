package mutate

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// TestPoolsThatTakeNoPodsArePassedOver: a pool whose every node is
// cordoned, unreachable or not ready gets no pod while another pool can
// take it; when every pool is down, the pod waits on the first, as on full
// pools. Before, such a pod was pinned to the down pool and waited there on
// an untolerated taint.
func TestPoolsThatTakeNoPodsArePassedOver(t *testing.T) {
	labels := func(accel string) map[string]string {
		return map[string]string{"accelerator": accel, inventory.LabelCount: "4"}
	}
	t4 := func(down ...corev1.Taint) corev1.Node {
		return gpuNode("t4w-0", "Tesla-T4", labels("t4"), map[string]int64{"nvidia.com/gpu": 4}, down...)
	}
	p100 := func(down ...corev1.Taint) corev1.Node {
		return gpuNode("p100w-0", "Tesla-P100-PCIE-16GB", labels("p100"), map[string]int64{"nvidia.com/gpu": 4}, down...)
	}
	cordoned := func(n corev1.Node) corev1.Node { n.Spec.Unschedulable = true; return n }
	unreachable := []corev1.Taint{
		{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute},
	}
	notReady := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
	// The pool the policy prefers when both take pods.
	first := mustMutate(t, mutator(t4(), p100()), pod("p", map[string]string{"nvidia.com/gpu": "1"})).Pod.Spec.NodeSelector[inventory.LabelProduct]
	if first == "" {
		t.Fatal("with both pools up, the pod was pinned to no pool")
	}
	other := map[string]string{"Tesla-T4": "Tesla-P100-PCIE-16GB", "Tesla-P100-PCIE-16GB": "Tesla-T4"}[first]
	down := func(product string, n corev1.Node, edit func(corev1.Node) corev1.Node) corev1.Node {
		if n.Labels[inventory.LabelProduct] == product {
			return edit(n)
		}
		return n
	}
	withTaints := func(ts ...corev1.Taint) func(corev1.Node) corev1.Node {
		return func(n corev1.Node) corev1.Node { n.Spec.Taints = append(n.Spec.Taints, ts...); return n }
	}
	tests := map[string]struct {
		nodes    []corev1.Node
		tolerate bool // the pod tolerates every taint, as a DaemonSet's pods do
		want     string
		wantWhy  string // in the explanation
	}{
		"the preferred pool is cordoned": {
			nodes: []corev1.Node{down(first, t4(), cordoned), down(first, p100(), cordoned)}, want: other,
			wantWhy: "1 cordoned"},
		"the preferred pool is unreachable": {
			nodes: []corev1.Node{down(first, t4(), withTaints(unreachable...)), down(first, p100(), withTaints(unreachable...))}, want: other,
			wantWhy: "1 unreachable"},
		"the preferred pool is not ready": {
			nodes: []corev1.Node{down(first, t4(), withTaints(notReady)), down(first, p100(), withTaints(notReady))}, want: other,
			wantWhy: "1 not ready"},
		"a pod that tolerates it keeps the preferred pool": {
			nodes:    []corev1.Node{down(first, t4(), withTaints(unreachable...)), down(first, p100(), withTaints(unreachable...))},
			tolerate: true, want: first},
		"every pool down: the pod waits on the preferred one": {
			nodes: []corev1.Node{cordoned(t4()), cordoned(p100())}, want: first,
			wantWhy: "takes new pods (1 cordoned)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := pod("p", map[string]string{"nvidia.com/gpu": "1"})
			if tc.tolerate {
				p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			}
			res := mustMutate(t, mutator(tc.nodes...), p)
			if !res.Allowed {
				t.Fatalf("denied: %s", res.Message)
			}
			if got := res.Pod.Spec.NodeSelector[inventory.LabelProduct]; got != tc.want {
				t.Errorf("pinned to %q, want %q; explanation: %s", got, tc.want, res.Explanation)
			}
			if !strings.Contains(res.Explanation, tc.wantWhy) {
				t.Errorf("explanation %q does not say %q", res.Explanation, tc.wantWhy)
			}
		})
	}
}
