package mutate

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// notInNamedPool keeps a pod placed on a pool derived from product labels off
// nodes an operator put in a named pool, which nodeSelector cannot say.
var notInNamedPool = corev1.NodeSelectorRequirement{Key: inventory.LabelPool, Operator: corev1.NodeSelectorOpDoesNotExist}

// excludeNamedPools ANDs notInNamedPool into every required node-affinity
// term (the terms are alternatives, so each must carry it); a pod without
// required terms gets one. A term that has it already is left as it is.
func excludeNamedPools(pod *corev1.Pod) {
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
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{notInNamedPool}}},
		}
		return
	}
	for i := range req.NodeSelectorTerms {
		t := &req.NodeSelectorTerms[i]
		if !hasRequirement(t.MatchExpressions, notInNamedPool) {
			t.MatchExpressions = append(t.MatchExpressions, notInNamedPool)
		}
	}
}

func hasRequirement(rs []corev1.NodeSelectorRequirement, want corev1.NodeSelectorRequirement) bool {
	for _, r := range rs {
		if r.Key == want.Key && r.Operator == want.Operator && len(r.Values) == 0 {
			return true
		}
	}
	return false
}
