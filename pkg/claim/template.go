package claim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

const (
	// ClassShare is the DeviceClass of a share of one GPU's memory.
	ClassShare = allocator.DRAClassShare
	// Request is the name of the one device request in a share template.
	Request = "gpu"
	// ManagedBy labels the templates gpuadmit owns.
	ManagedBy    = "app.kubernetes.io/managed-by"
	managedValue = "gpuadmit"
	// LabelShare marks a pod whose containers hold gpuadmit share claims;
	// the reconciler watches and lists only those of the pods gpuadmit
	// placed (the webhook's cache holds all of them, for free capacity).
	LabelShare = "gpuadmit.io/dra-share"
	// LabelAlternatives marks the claims made from an alternatives
	// template (the template's claim metadata carries it, and the API
	// server's claim controller copies it onto each claim), so the
	// webhook watches those claims only: it counts the devices they were
	// allocated as held on the pool of their node.
	LabelAlternatives = "gpuadmit.io/dra-alternatives"

	templatePrefix = "gpuadmit-share-"
	// PodClaimPrefix starts the names of the pod resource claims gpuadmit
	// writes; the rest is the container's name.
	PodClaimPrefix = "gpuadmit-"
)

// Spec is the claim spec of a share of mib MiB of one GPU's memory.
func Spec(mib int64) resourceapi.ResourceClaimSpec {
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
		Name: Request,
		Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: ClassShare,
			AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
			Count:           1,
			Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
				allocator.DRACapacityMemory: *resource.NewQuantity(mib<<20, resource.BinarySI),
			}},
		},
	}}}}
}

// TemplateName is the name of the template of a share of mib MiB:
// "gpuadmit-share-10240mi-<hash of the spec>".
func TemplateName(mib int64) string {
	b, _ := json.Marshal(Spec(mib)) // a struct of strings and quantities always encodes
	sum := sha256.Sum256(b)
	return fmt.Sprintf("%s%dmi-%s", templatePrefix, mib, hex.EncodeToString(sum[:])[:10])
}

// Template is the ResourceClaimTemplate of a share of mib MiB in namespace.
func Template(namespace string, mib int64) *resourceapi.ResourceClaimTemplate {
	t := &resourceapi.ResourceClaimTemplate{Spec: resourceapi.ResourceClaimTemplateSpec{Spec: Spec(mib)}}
	t.Name, t.Namespace = TemplateName(mib), namespace
	t.Labels = map[string]string{ManagedBy: managedValue}
	return t
}

// IsTemplateName reports whether name is one gpuadmit's templates use: a
// share's or an alternatives template's.
func IsTemplateName(name string) bool {
	return strings.HasPrefix(name, templatePrefix) || IsAlternativesName(name)
}

// ShareOf is the share a template name stands for: ok only when name is
// exactly what TemplateName writes for it, so a name from another version
// of gpuadmit, or made up, is never created with a spec it does not hash.
func ShareOf(name string) (mib int64, ok bool) {
	rest, found := strings.CutPrefix(name, templatePrefix)
	if !found {
		return 0, false
	}
	num, _, found := strings.Cut(rest, "mi-")
	mib, err := strconv.ParseInt(num, 10, 64)
	if !found || err != nil || mib <= 0 || TemplateName(mib) != name {
		return 0, false
	}
	return mib, true
}
