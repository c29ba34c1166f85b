package intent

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Every DeviceClass is also an extended resource (KEP-5004, GA in
// Kubernetes 1.37): a container may ask for deviceclass.resource.kubernetes.io/<class>: N
// and the scheduler creates a claim for N devices of the class. For
// gpuadmit's own classes that would be a GPU outside the policy and the
// accounting, so the webhook reads them as a dialect of its own: a class
// that maps onto an existing request is translated, the rest are denied.
const (
	// ResourceDeviceClassPrefix starts the implicit extended resource of every DeviceClass.
	ResourceDeviceClassPrefix = "deviceclass.resource.kubernetes.io/"
	// DeviceClassSuffix ends the name of every DeviceClass of gpuadmit's DRA
	// driver (deploy/dra); the claims policy matches the same suffix.
	DeviceClassSuffix = ".gpuadmit.io"
	// DeviceClassGPU is gpuadmit's whole-GPU class (extendedResourceName nvidia.com/gpu).
	DeviceClassGPU = "gpu.gpuadmit.io"
	// DeviceClassShare is gpuadmit's class of a share of one GPU's memory.
	DeviceClassShare = "gpu-share.gpuadmit.io"
	// deviceClassMIGPrefix starts the class of a MIG profile: mig-1g.10gb.me.gpuadmit.io.
	deviceClassMIGPrefix = "mig-"
)

// DeviceClassResources lists the implicit extended resources of gpuadmit's
// fixed DeviceClasses, sorted; those of MIG profiles are
// deviceclass.resource.kubernetes.io/mig-<profile>.gpuadmit.io.
func DeviceClassResources() []corev1.ResourceName {
	return []corev1.ResourceName{ResourceDeviceClassPrefix + DeviceClassShare, ResourceDeviceClassPrefix + DeviceClassGPU}
}

// IsDeviceClassResource reports whether name is the implicit extended
// resource of one of gpuadmit's DeviceClasses (or of a class named as if it
// were one). Other drivers' classes are not GPU resources gpuadmit reads.
func IsDeviceClassResource(name corev1.ResourceName) bool {
	class, ok := strings.CutPrefix(string(name), ResourceDeviceClassPrefix)
	// Class names are lowercase DNS names; a resource name may carry capitals,
	// which name no class at all, and are still kept away from the scheduler.
	return ok && strings.HasSuffix(strings.ToLower(class), DeviceClassSuffix)
}

// readDeviceClass reads deviceclass.resource.kubernetes.io/<class>: N for
// one of gpuadmit's classes: the whole-GPU class is N whole GPUs (as
// nvidia.com/gpu: N) and a MIG class N slices of its profile (as
// nvidia.com/mig-<profile>: N), which the policy then decides like any
// request. The share class is denied: its claim would carry no memory
// capacity and take a whole GPU. Any other name is no class of gpuadmit's.
func readDeviceClass(c container, es []entry) (Request, field.ErrorList) {
	var errs field.ErrorList
	for _, e := range es[1:] {
		errs = append(errs, field.Forbidden(e.path, c.detail(
			"asks for two of gpuadmit's DeviceClasses (%s; %s); ask for one kind of GPU per container", es[0], e)))
	}
	e := es[0]
	class := strings.TrimPrefix(string(e.key), ResourceDeviceClassPrefix)
	n, errs2 := c.integer(e)
	errs = append(errs, errs2...)
	profile, isMIG := migOfClass(class)
	switch {
	case class == DeviceClassGPU:
		r := Request{Form: Whole, Count: n}
		r.Warnings = []string{c.detail("%s is read as %s: %d, whole GPUs; write %s (or %s) in the pod to say so", e,
			ResourceNVIDIAGPU, n, ResourceNVIDIAGPU, ResourceNativeGPU)}
		return r, errs
	case isMIG && migProfile.MatchString(profile):
		r := Request{Form: Profile, Count: n, Profile: profile}
		if base, ok := strings.CutSuffix(profile, ".me"); ok {
			r.Profile = base + "+me"
		}
		r.Warnings = []string{c.detail("%s is read as %s%s: %d; write that in the pod to say so", e, ResourceMIGPrefix, profile, n)}
		return r, errs
	case class == DeviceClassShare:
		return Request{}, append(errs, field.Forbidden(e.path, c.detail(
			"%s asks for a share of a GPU through the DeviceClass's implicit extended resource, which carries no memory size "+
				"(its claim would take the whole GPU, outside gpuadmit's accounting); ask for the memory instead, "+
				"such as %s: 10Gi, or for a fraction, such as %s: 500m", e, ResourceNativeGPUMemory, ResourceNativeGPU)))
	}
	return Request{}, append(errs, field.Invalid(e.path, string(e.key), c.detail(
		"%q is not one of gpuadmit's DeviceClasses; ask for whole GPUs as %s (or %s%s), "+
			"a MIG slice as %s<profile> (or %s%s<profile>%s), or memory as %s",
		class, ResourceNVIDIAGPU, ResourceDeviceClassPrefix, DeviceClassGPU,
		ResourceMIGPrefix, ResourceDeviceClassPrefix, deviceClassMIGPrefix, DeviceClassSuffix, ResourceNativeGPUMemory)))
}

// migOfClass returns the profile, as a resource name spells it ("1g.10gb.me"),
// of a MIG class name.
func migOfClass(class string) (string, bool) {
	rest, ok := strings.CutPrefix(class, deviceClassMIGPrefix)
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, DeviceClassSuffix)
}
