package write

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuadmit/gpuadmit/pkg/claim"
	"github.com/gpuadmit/gpuadmit/pkg/intent"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/decide"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

// addClaims gives each share on a DRA pool a pod resource claim from
// gpuadmit's template of its size, and the container a reference to it.
// Kubernetes allocates all of a pod's claims before binding, so where it
// counts extended resources as a maximum (init containers run before the app
// containers) claims would add up: non-sidecar init containers therefore
// share the claim of the largest app container, sized for the larger of
// the two. Sidecars run beside the app and keep claims of their own.
func addClaims(pod *corev1.Pod, assigns []decide.Assignment) {
	host := largestAppClaim(assigns)
	size := map[string]int64{} // claim name → MiB
	var order []string
	for _, a := range assigns {
		if a.ClaimMiB == 0 {
			continue
		}
		name := podClaimName(a.Req.Container)
		if host != nil && a.Req.Kind == intent.Init {
			name = podClaimName(host.Req.Container)
		}
		if _, ok := size[name]; !ok {
			order = append(order, name)
		}
		size[name] = max(size[name], a.ClaimMiB)
		c := decide.ContainerOf(pod, a.Req)
		c.Resources.Claims = append(c.Resources.Claims, corev1.ResourceClaim{Name: name})
	}
	for _, name := range order {
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{
			Name: name, ResourceClaimTemplateName: ptr.To(claim.TemplateName(size[name])),
		})
	}
	if len(order) > 0 {
		record.SetMeta(&pod.Labels, map[string]string{claim.LabelShare: "true"})
	}
}

// largestAppClaim is the app container (not a sidecar) with the largest
// claim, which non-sidecar init containers share; nil when none has one.
func largestAppClaim(assigns []decide.Assignment) *decide.Assignment {
	var host *decide.Assignment
	for i := range assigns {
		a := &assigns[i]
		if a.ClaimMiB > 0 && a.Req.Kind == intent.App && (host == nil || a.ClaimMiB > host.ClaimMiB) {
			host = a
		}
	}
	return host
}

// podClaimName is "gpuadmit-<container>", or a hash of the container's name
// where that would not be a DNS label.
func podClaimName(container string) string {
	name := claim.PodClaimPrefix + container
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(container))
	return claim.PodClaimPrefix + hex.EncodeToString(sum[:])[:16]
}

// ForeignClaimUse names a pod resource claim that uses one of gpuadmit's
// templates on a pod gpuadmit has not admitted, or returns "".
func ForeignClaimUse(pod *corev1.Pod) string {
	for i, c := range pod.Spec.ResourceClaims {
		if record.IsOwnClaim(c) {
			return fmt.Sprintf("spec.resourceClaims[%d].resourceClaimTemplateName: %q is a template of gpuadmit's, "+
				"which only gpuadmit writes into pods; ask for GPU memory in the container's resources "+
				"(for example gpuadmit.io/gpu-memory: 10Gi) and gpuadmit writes the claim", i, *c.ResourceClaimTemplateName)
		}
	}
	return ""
}

// RemoveClaims undoes addClaims: gpuadmit's pod claims, the containers'
// references to them, and the label.
func RemoveClaims(pod *corev1.Pod) {
	own := map[string]bool{}
	pod.Spec.ResourceClaims = slices.DeleteFunc(pod.Spec.ResourceClaims, func(c corev1.PodResourceClaim) bool {
		own[c.Name] = record.IsOwnClaim(c)
		return own[c.Name]
	})
	if len(pod.Spec.ResourceClaims) == 0 {
		pod.Spec.ResourceClaims = nil
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			rc := &list[i].Resources
			rc.Claims = slices.DeleteFunc(rc.Claims, func(c corev1.ResourceClaim) bool { return own[c.Name] })
			if len(rc.Claims) == 0 {
				rc.Claims = nil
			}
		}
	}
	delete(pod.Labels, claim.LabelShare)
}
