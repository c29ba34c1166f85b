package mutate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

// TestDerivedPoolStaysOffNamedPools: H100 nodes an operator named
// "inference" share the product label with unnamed H100 nodes; a pod placed
// on the derived pool must not be able to land on the named ones.
func TestDerivedPoolStaysOffNamedPools(t *testing.T) {
	plain := *h100Mixed.DeepCopy()
	plain.Labels["zone"] = "a" // the pod's own affinity below asks for it
	named := *plain.DeepCopy()
	named.Name, named.Labels[inventory.LabelPool] = "h100-named", "inference"
	user := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}
	tests := map[string]struct {
		nodes    []corev1.Node
		affinity *corev1.Affinity
		want     []corev1.NodeSelectorTerm
	}{
		"no named pool of that product: no affinity": {nodes: []corev1.Node{plain}},
		"named nodes overlap: the pod gets one term": {nodes: []corev1.Node{plain, named},
			want: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{record.NotInNamedPool}}}},
		"the pod's own terms each get the clause": {nodes: []corev1.Node{plain, named},
			affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{user}}}},
			want:     []corev1.NodeSelectorTerm{{MatchExpressions: append(append([]corev1.NodeSelectorRequirement{}, user.MatchExpressions...), record.NotInNamedPool)}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := mutator(tc.nodes...)
			p := pod("p", map[string]string{"nvidia.com/gpumem": "3000"})
			p.Spec.Affinity = tc.affinity
			res := mustMutate(t, m, p)
			if !res.Allowed {
				t.Fatal(res.Message)
			}
			var got []corev1.NodeSelectorTerm
			if a := res.Pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
				got = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("required node affinity (-want +got):\n%s", diff)
			}
			if again := mustMutate(t, m, res.Pod); !again.Allowed || len(again.Patch) != 0 {
				t.Errorf("deciding again: allowed %v, patch %v, %s", again.Allowed, again.Patch, again.Message)
			}
		})
	}
}
