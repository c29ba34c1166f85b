package claim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// Alternatives. Where a pod's policy accepts several DRA pools, gpuadmit
// pins no pool: each GPU container gets a claim from a template whose one
// request lists what the container accepts as firstAvailable subrequests,
// in the policy's order, and the scheduler allocates, on each node it
// tries, the first alternative that fits there (the structured allocator
// tries subrequests in order). Each alternative selects its devices by
// DeviceClass and by the model attribute the agent publishes, so the model
// is kept without a nodeSelector.

const (
	// AnnotationAlternatives is set by the webhook on a pod whose claims
	// come from alternatives templates: template name → the alternatives
	// (JSON). The reconciler makes each template from it, after checking
	// that the name is the hash of what it would write; the annotation is
	// gpuadmit's own (users cannot set or change it) and under its seal.
	AnnotationAlternatives = "gpuadmit.io/claim-alternatives"

	// MaxAlternatives is the API's limit on firstAvailable subrequests.
	MaxAlternatives = resourceapi.FirstAvailableDeviceRequestMaxSize

	altPrefix = "gpuadmit-alt-"
)

// Backends of an Alternative, as the policy names them.
const (
	BackendMIG    = "mig"
	BackendShared = "shared"
	BackendWhole  = "whole"
)

// Alternative is one form a container accepts on a DRA pool: Count MIG
// devices of Profile, a share of MiB of one GPU, or Count whole GPUs, all
// of Model. Its field names are short: it rides on the pod.
type Alternative struct {
	Backend string `json:"b"`
	Model   string `json:"m"`
	Profile string `json:"p,omitempty"`
	Count   int64  `json:"n,omitempty"`
	// MiB is the share's memory; for MIG and whole GPUs it is not part of
	// the request (the device has what it has).
	MiB int64 `json:"mib,omitempty"`
}

// AlternativesSpec is the claim spec of a container that accepts alts, in
// order: one request, Request, with a subrequest per alternative.
func AlternativesSpec(alts []Alternative) resourceapi.ResourceClaimSpec {
	subs := make([]resourceapi.DeviceSubRequest, len(alts))
	for i, a := range alts {
		subs[i] = subRequest(i, a)
	}
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
		Name: Request, FirstAvailable: subs,
	}}}}
}

// subRequest is alternative i: "mig0", "shared1", "whole2" (DNS labels,
// unique by their index), of the alternative's class, on its model.
func subRequest(i int, a Alternative) resourceapi.DeviceSubRequest {
	s := resourceapi.DeviceSubRequest{
		Name:           fmt.Sprintf("%s%d", a.Backend, i),
		AllocationMode: resourceapi.DeviceAllocationModeExactCount,
		Count:          max(a.Count, 1),
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: ModelSelector(a.Model),
		}}},
	}
	switch a.Backend {
	case BackendMIG:
		s.DeviceClassName = allocator.DRAMIGClass(a.Profile)
	case BackendShared:
		s.DeviceClassName, s.Count = ClassShare, 1
		s.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
			allocator.DRACapacityMemory: *resource.NewQuantity(a.MiB<<20, resource.BinarySI),
		}}
	default:
		s.DeviceClassName = allocator.DRAClassGPU
	}
	return s
}

// ModelSelector is the CEL selector of the devices of model, by the model
// attribute gpuadmit's driver publishes.
func ModelSelector(model string) string {
	return fmt.Sprintf("device.attributes[%q].%s == %q", allocator.DRADriver, allocator.DRAAttrModel, model)
}

// AlternativesTemplateName is the template of alts: "gpuadmit-alt-<hash of
// the spec>". Pods that accept the same alternatives, in the same order and
// sizes, share it (in one namespace).
func AlternativesTemplateName(alts []Alternative) string {
	b, _ := json.Marshal(AlternativesSpec(alts)) // strings, integers and quantities always encode
	sum := sha256.Sum256(b)
	return altPrefix + hex.EncodeToString(sum[:])[:16]
}

// AlternativesTemplate is the ResourceClaimTemplate of alts in namespace.
// Its claims carry LabelAlternatives; the name hashes the claim spec only.
func AlternativesTemplate(namespace string, alts []Alternative) *resourceapi.ResourceClaimTemplate {
	t := &resourceapi.ResourceClaimTemplate{Spec: resourceapi.ResourceClaimTemplateSpec{Spec: AlternativesSpec(alts)}}
	t.Spec.ObjectMeta.Labels = map[string]string{LabelAlternatives: "true"}
	t.Name, t.Namespace = AlternativesTemplateName(alts), namespace
	t.Labels = map[string]string{ManagedBy: managedValue}
	return t
}

// IsAlternativesName reports whether name is an alternatives template's.
func IsAlternativesName(name string) bool { return strings.HasPrefix(name, altPrefix) }

// EncodeAlternatives is AnnotationAlternatives' value for templates.
func EncodeAlternatives(templates map[string][]Alternative) string {
	b, _ := json.Marshal(templates) // a map of strings to plain structs always encodes
	return string(b)
}

// AlternativesOf reads, from a pod's AnnotationAlternatives value, the
// alternatives of the template name: ok only when the name is exactly the
// one AlternativesTemplateName gives them, so a template is never created
// with a spec its name does not hash.
func AlternativesOf(annotation, name string) ([]Alternative, bool) {
	var m map[string][]Alternative
	if err := json.Unmarshal([]byte(annotation), &m); err != nil {
		return nil, false
	}
	alts, ok := m[name]
	if !ok || len(alts) == 0 || len(alts) > MaxAlternatives || AlternativesTemplateName(alts) != name {
		return nil, false
	}
	return alts, true
}
