package record

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/claim"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// NotInNamedPool keeps a pod placed on a pool derived from product labels off
// nodes an operator put in a named pool, which nodeSelector cannot say.
var NotInNamedPool = corev1.NodeSelectorRequirement{Key: inventory.LabelPool, Operator: corev1.NodeSelectorOpDoesNotExist}

// HasRequirement reports whether rs holds want's key and operator, with no values.
func HasRequirement(rs []corev1.NodeSelectorRequirement, want corev1.NodeSelectorRequirement) bool {
	for _, r := range rs {
		if r.Key == want.Key && r.Operator == want.Operator && len(r.Values) == 0 {
			return true
		}
	}
	return false
}

// IsOwnClaim reports whether a pod resource claim is gpuadmit's.
func IsOwnClaim(c corev1.PodResourceClaim) bool {
	return c.ResourceClaimTemplateName != nil && claim.IsTemplateName(*c.ResourceClaimTemplateName)
}

// HasToleration reports whether one of have matches t.
func HasToleration(have []corev1.Toleration, t corev1.Toleration) bool {
	for i := range have {
		if have[i].MatchToleration(&t) {
			return true
		}
	}
	return false
}

// SetMeta adds src's entries to *dst, making the map where it is nil and
// src has any: how gpuadmit writes labels and annotations.
func SetMeta(dst *map[string]string, src map[string]string) {
	if len(src) == 0 {
		return
	}
	if *dst == nil {
		*dst = map[string]string{}
	}
	for k, v := range src {
		(*dst)[k] = v
	}
}
