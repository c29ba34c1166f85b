package write

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

// ExcludeNamedPools ANDs record.NotInNamedPool into every required node-affinity
// term (the terms are alternatives, so each must carry it); a pod without
// required terms gets one. A term that has it already is left as it is.
func ExcludeNamedPools(pod *corev1.Pod) {
	if pod.Spec.Affinity == nil {
		pod.Spec.Affinity = &corev1.Affinity{}
	}
	a := pod.Spec.Affinity
	if a.NodeAffinity == nil {
		a.NodeAffinity = &corev1.NodeAffinity{}
	}
	req := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if req == nil || len(req.NodeSelectorTerms) == 0 {
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{record.NotInNamedPool}}},
		}
		return
	}
	for i := range req.NodeSelectorTerms {
		t := &req.NodeSelectorTerms[i]
		if !record.HasRequirement(t.MatchExpressions, record.NotInNamedPool) {
			t.MatchExpressions = append(t.MatchExpressions, record.NotInNamedPool)
		}
	}
}
