package inventory_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// TestNodesThatTakeNoPods: a node's Down taints say that it takes no new
// pods — cordoned (spec.unschedulable, before and after the node controller
// taints it), unreachable or not ready — and leave out the other taints;
// the lifecycle taints stay out of the pool's taints, which gpuadmit
// tolerates for the pods it places.
func TestNodesThatTakeNoPods(t *testing.T) {
	cordon := corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	unreachable := taint(corev1.TaintNodeUnreachable, "", corev1.TaintEffectNoSchedule)
	unreachableExec := taint(corev1.TaintNodeUnreachable, "", corev1.TaintEffectNoExecute)
	notReady := taint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoSchedule)
	dedicated := taint("dedicated", "gpu", corev1.TaintEffectNoSchedule)
	tests := map[string]struct {
		unschedulable bool
		taints        []corev1.Taint
		want          []corev1.Taint
	}{
		"up":                                 {taints: []corev1.Taint{dedicated}},
		"cordoned, not tainted yet":          {unschedulable: true, want: []corev1.Taint{cordon}},
		"cordoned and tainted, counted once": {unschedulable: true, taints: []corev1.Taint{cordon}, want: []corev1.Taint{cordon}},
		"unreachable":                        {taints: []corev1.Taint{dedicated, unreachable, unreachableExec}, want: []corev1.Taint{unreachable, unreachableExec}},
		"not ready":                          {taints: []corev1.Taint{notReady}, want: []corev1.Taint{notReady}},
		"a preference keeps no pod off":      {taints: []corev1.Taint{taint(corev1.TaintNodeUnreachable, "", corev1.TaintEffectPreferNoSchedule)}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := node("h100-0", map[string]string{inventory.LabelProduct: h100}, map[string]string{"nvidia.com/gpu": "8"}, tc.taints...)
			n.Spec.Unschedulable = tc.unschedulable
			inv := inventory.Build([]corev1.Node{n}, nil)
			if len(inv.Pools) != 1 {
				t.Fatalf("%d pools, want 1 (a node that takes no pods is still in its pool)", len(inv.Pools))
			}
			p := inv.Pools[0]
			if diff := cmp.Diff(tc.want, p.Nodes[0].Down); diff != "" {
				t.Errorf("Down (-want +got):\n%s", diff)
			}
			for _, pt := range p.Taints {
				if pt.Key != "dedicated" {
					t.Errorf("pool taint %v: lifecycle taints are no pool's", pt)
				}
			}
		})
	}
}
