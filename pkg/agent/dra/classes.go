package dra

import (
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// DeviceClass names of the driver (deploy/dra holds them as YAML).
const (
	// ClassGPU is a whole GPU; pods ask for it as nvidia.com/gpu too.
	ClassGPU = allocator.DRAClassGPU
	// ClassShare is a share of one GPU's memory, asked for with a memory
	// capacity request.
	ClassShare = allocator.DRAClassShare
)

// MIGClass is the DeviceClass of a MIG profile: "mig-1g.10gb.me.gpuadmit.io"
// for "1g.10gb+me".
func MIGClass(profile string) string { return allocator.DRAMIGClass(profile) }

// IsClass reports whether a DeviceClass name is one of gpuadmit's: only
// claims through those pass the admission policy that guards who may write
// them (deploy/dra/claims-policy.yaml), so only those are prepared.
func IsClass(name string) bool { return strings.HasSuffix(name, allocator.DRAClassSuffix) }

// MIGResource is the extended resource NVIDIA's device plugin serves a MIG
// profile as ("nvidia.com/mig-1g.10gb.me"), mapped onto MIGClass.
func MIGResource(profile string) string { return "nvidia.com/mig-" + kubeProfile(profile) }

// kubeProfile writes a profile as Kubernetes names allow: "+" becomes ".".
func kubeProfile(profile string) string { return strings.ReplaceAll(profile, "+", ".") }

// DeviceClasses are the driver's classes: whole GPUs, shares, and one per
// MIG profile name in the catalog, in that order, profiles sorted by name.
func DeviceClasses(c *allocator.Catalog) []resourceapi.DeviceClass {
	gpu := fmt.Sprintf("device.driver == %q && device.attributes[%q].%s == %q", DriverName, DriverName, AttrType, TypeGPU)
	out := []resourceapi.DeviceClass{
		deviceClass(ClassGPU, gpu, allocator.ResourceGPU),
		deviceClass(ClassShare, gpu, ""),
	}
	for _, p := range migProfiles(c) {
		sel := fmt.Sprintf("device.driver == %q && device.attributes[%q].%s == %q && device.attributes[%q].%s == %q",
			DriverName, DriverName, AttrType, TypeMIG, DriverName, AttrProfile, p)
		out = append(out, deviceClass(MIGClass(p), sel, MIGResource(p)))
	}
	return out
}

// migProfiles are the catalog's MIG profile names, each once, sorted.
func migProfiles(c *allocator.Catalog) []string {
	var out []string
	for _, m := range c.Models() {
		for _, p := range m.Profiles {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func deviceClass(name, cel, extended string) resourceapi.DeviceClass {
	dc := resourceapi.DeviceClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "DeviceClass"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/part-of": "gpuadmit"}},
		Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: cel}}},
		},
	}
	if extended != "" {
		dc.Spec.ExtendedResourceName = ptr.To(extended)
	}
	return dc
}
