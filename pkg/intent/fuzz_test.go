package intent

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// fuzzKeys are the resource names FuzzRead picks from; "" stands for a MIG
// key built from the fuzzed profile. New keys go last, so that the seeds
// keep their meaning.
var fuzzKeys = []corev1.ResourceName{
	ResourceNativeGPU, ResourceNativeGPUMemory, ResourceShareMemory, ResourceNVIDIAGPU,
	ResourceHAMiMemory, ResourceHAMiMemoryPercentage, ResourceHAMiCores, ResourceGPUShareMemory,
	ResourceVolcanoNumber, ResourceVolcanoMemory, ResourceVolcanoCores, "cpu", "", ResourceNVIDIAReplica,
	ResourceHAMiPriority, ResourceVolcanoMemoryPercentage, ResourceVolcanoShareMemory, ResourceVolcanoShareNumber,
	ResourceDeviceClassPrefix + DeviceClassGPU, ResourceDeviceClassPrefix + DeviceClassShare, fuzzMIGClass,
	ResourceDeviceClassPrefix + "fpga.example.com",
}

// fuzzMIGClass stands for gpuadmit's DeviceClass of the fuzzed MIG profile,
// by its implicit extended resource name.
const fuzzMIGClass = "deviceclass-mig"

// TestFuzzKeysCoverEveryResource: FuzzRead picks from every GPU resource
// name intent reads, the implicit DeviceClass names included.
func TestFuzzKeysCoverEveryResource(t *testing.T) {
	for _, k := range append(Resources(), DeviceClassResources()...) {
		if !slices.Contains(fuzzKeys, k) {
			t.Errorf("fuzzKeys lacks %s", k)
		}
	}
}

// fuzzAnnotations are the annotations FuzzRead may set, one bit of a mask each.
var fuzzAnnotations = []string{
	AnnotationKAIFraction, AnnotationKAIMemory, AnnotationKAINumDevices, AnnotationKAIContainerName,
	AnnotationClass, AnnotationBackend, AnnotationModel,
}

func FuzzRead(f *testing.F) {
	f.Add(byte(3), "1", byte(4), "3000", byte(0), "a", "b", "1g.10gb", uint8(0), "0.5", "100", "2", "b", "training")
	f.Add(byte(0), "500m", byte(1), "10Gi", byte(1), "a", "b", "3g.40gb.me", uint8(1), ".25", "x", "0", "a", "")
	f.Add(byte(12), "2", byte(12), "1", byte(6), "a", "a", "1g.10gb+me", uint8(0x0b), "1", "2048", "3", "a", "Bad")
	f.Add(byte(8), "2", byte(9), "4096", byte(2), "main", "side", "7g.141gb", uint8(0x7f), "abc", "-1", "", "x", "mig")
	f.Add(byte(13), "2", byte(3), "1", byte(0), "a", "b", "1g.10gb", uint8(0x20), "0.5", "100", "2", "a", "whole")
	// The keys added after the first seeds, each once: HAMi's priority,
	// Volcano's percentage and older share plugin, and the implicit
	// DeviceClass names (gpuadmit's whole-GPU, share and MIG classes, another driver's).
	f.Add(byte(14), "1", byte(3), "1", byte(0), "a", "b", "1g.10gb", uint8(0), "", "", "", "", "")
	f.Add(byte(15), "50", byte(9), "1", byte(1), "a", "b", "1g.10gb", uint8(0), "", "", "", "", "")
	f.Add(byte(16), "4096", byte(17), "2", byte(0), "a", "b", "1g.10gb", uint8(0), "", "", "", "", "")
	f.Add(byte(18), "8", byte(19), "1", byte(0), "a", "b", "1g.10gb", uint8(0x20), "", "", "", "", "whole")
	f.Add(byte(20), "1", byte(21), "1", byte(2), "a", "b", "1g.10gb.me", uint8(0), "", "", "", "", "")
	f.Add(byte(18), "1", byte(3), "1", byte(12), "a", "b", "2g.20gb", uint8(0), "", "", "", "", "")
	f.Fuzz(func(t *testing.T, k1 byte, q1 string, k2 byte, q2 string, layout byte,
		name1, name2, profile string, annMask uint8, frac, mem, num, cname, hint string) {
		qa, err1 := resource.ParseQuantity(q1)
		qb, err2 := resource.ParseQuantity(q2)
		if err1 != nil || err2 != nil {
			t.Skip()
		}
		c1 := corev1.Container{Name: name1, Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{fuzzKey(k1, profile): qa}}}
		c2 := corev1.Container{Name: name2, Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{fuzzKey(k2, profile): qb}}}
		if layout&4 != 0 { // the second key in requests only
			c2.Resources.Requests, c2.Resources.Limits = c2.Resources.Limits, nil
		}
		if layout&8 != 0 { // the first key in requests too, maybe different
			c1.Resources.Requests = corev1.ResourceList{fuzzKey(k1, profile): qb}
		}
		pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{c1}}}
		switch layout % 4 {
		case 0:
			pod.Spec.Containers = append(pod.Spec.Containers, c2)
		case 1:
			pod.Spec.InitContainers = []corev1.Container{c2}
		case 2:
			pod.Spec.InitContainers = []corev1.Container{sidecar(c2)}
		}
		pod.Annotations = map[string]string{}
		values := []string{frac, mem, num, cname, hint, hint, hint}
		for i, k := range fuzzAnnotations {
			if annMask&(1<<i) != 0 {
				pod.Annotations[k] = values[i]
			}
		}
		if annMask&0x80 != 0 {
			pod.Labels = map[string]string{LabelClass: hint + "x"}
		}
		got, errs := Read(pod)
		for _, e := range errs {
			if e == nil || e.Field == "" {
				t.Errorf("Read: error without a field: %v", e)
			}
		}
		// A container in error has no Request, so every Request returned must
		// be whole, errors elsewhere or not.
		for _, r := range got.Requests {
			checkRequest(t, r)
		}
	})
}

// fuzzKey picks a resource name by b; the MIG choice uses profile.
func fuzzKey(b byte, profile string) corev1.ResourceName {
	k := fuzzKeys[int(b)%len(fuzzKeys)]
	switch k {
	case "":
		return corev1.ResourceName(ResourceMIGPrefix + profile)
	case fuzzMIGClass:
		return corev1.ResourceName(ResourceDeviceClassPrefix + deviceClassMIGPrefix + profile + DeviceClassSuffix)
	}
	return k
}

// checkRequest asserts that r sets exactly the fields of its Form.
func checkRequest(t *testing.T, r Request) {
	t.Helper()
	ok := r.Count >= 1 && r.Count <= MaxCount && len(r.Source) > 0 && r.CoresPercent >= 0 && r.CoresPercent <= MaxPercent
	switch r.Form {
	case Memory:
		ok = ok && r.MemoryMiB > 0 && r.MemoryMiB <= MaxMemoryMiB && r.FractionMilli == 0 && r.Profile == ""
	case Fraction:
		ok = ok && r.FractionMilli >= 1 && r.FractionMilli <= 1000 && r.MemoryMiB == 0 && r.Profile == ""
	case Whole:
		ok = ok && r.MemoryMiB == 0 && r.FractionMilli == 0 && r.Profile == ""
	case Profile:
		ok = ok && r.Profile != "" && r.MemoryMiB == 0 && r.FractionMilli == 0
	default:
		ok = false
	}
	if !ok {
		t.Errorf("Read: inconsistent request %+v", r)
	}
}
