package mutate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

const (
	implicitGPU   = "deviceclass.resource.kubernetes.io/gpu.gpuadmit.io"
	implicitShare = "deviceclass.resource.kubernetes.io/gpu-share.gpuadmit.io"
	implicitMIG   = "deviceclass.resource.kubernetes.io/mig-1g.10gb.gpuadmit.io"
	otherDriver   = "deviceclass.resource.kubernetes.io/fpga.example.com"
)

// TestImplicitDeviceClassIsDecided: a pod asking for gpuadmit's classes by
// their implicit extended resource gets gpuadmit's decision, written in
// place of the name: what the policy gives, the accounting resources, and
// the original in the record. Nothing of the implicit name is left for the
// scheduler to turn into a claim.
func TestImplicitDeviceClassIsDecided(t *testing.T) {
	tests := map[string]struct {
		node   corev1.Node
		limits map[string]string
		want   map[string]string
	}{
		"the whole-GPU class is whole GPUs": {a100Whole, map[string]string{implicitGPU: "2"}, map[string]string{"nvidia.com/gpu": "2"}},
		"a MIG class is its slice":          {h100Mixed, map[string]string{implicitMIG: "1"}, map[string]string{"nvidia.com/mig-1g.10gb": "1"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := pod("p", tc.limits)
			p.Spec.Containers[0].Resources.Requests = list(tc.limits)
			res := mustMutate(t, mutator(tc.node), p)
			if !res.Allowed {
				t.Fatalf("denied: %s", res.Message)
			}
			c := res.Pod.Spec.Containers[0]
			if diff := cmp.Diff(tc.want, gpuResources(c)); diff != "" {
				t.Errorf("GPU resources (-want +got):\n%s", diff)
			}
			if len(accountingResources(c)) == len(gpuResources(c)) {
				t.Errorf("no accounting resources: %v", c.Resources.Limits)
			}
			for k := range tc.limits {
				if !strings.Contains(res.Pod.Annotations[record.AnnotationRequest], k) {
					t.Errorf("record %s = %q, want the original %s", record.AnnotationRequest, res.Pod.Annotations[record.AnnotationRequest], k)
				}
			}
			if !strings.Contains(strings.Join(res.Warnings, "\n"), "is read as") {
				t.Errorf("warnings %q do not say how the name was read", res.Warnings)
			}
		})
	}
}

// TestImplicitDeviceClassDenied: the share class (a claim without memory
// capacity would take the whole GPU) and names that are no class of
// gpuadmit's are denied, with the container, the field and what to write.
func TestImplicitDeviceClassDenied(t *testing.T) {
	tests := map[string]struct {
		limits map[string]string
		want   []string
	}{
		"the share class": {map[string]string{implicitShare: "1"}, []string{
			`container "a"`, "spec.containers[0].resources.limits[" + implicitShare + "]", "gpuadmit.io/gpu-memory"}},
		"an unknown gpuadmit class": {map[string]string{"deviceclass.resource.kubernetes.io/x.gpuadmit.io": "1"}, []string{
			`container "a"`, "spec.containers[0].resources.limits[deviceclass.resource.kubernetes.io/x.gpuadmit.io]", "nvidia.com/gpu"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := mustMutate(t, mutator(a100Whole, t4Shared), pod("p", tc.limits))
			if res.Allowed {
				t.Fatalf("allowed, with %v", res.Pod.Spec.Containers[0].Resources.Limits)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Message, w) {
					t.Errorf("message %q does not contain %q", res.Message, w)
				}
			}
		})
	}
}

// TestOtherDriversClassesPassUnchanged: another driver's class by its
// implicit name is not gpuadmit's: alone, the pod is left as it is; beside
// a GPU, it stays as written while the GPU is decided, and the sealed pod
// comes back unchanged.
func TestOtherDriversClassesPassUnchanged(t *testing.T) {
	alone := pod("p", map[string]string{otherDriver: "1"})
	if res := mustMutate(t, mutator(a100Whole), alone.DeepCopy()); !res.Allowed || len(res.Patch) > 0 {
		t.Errorf("another driver's class alone: allowed %v, patch %v (%s); want allowed unchanged", res.Allowed, res.Patch, res.Message)
	}
	m := keyed(defaultEngine, record.KeySet{Current: key1}, advertising(a100Whole))
	res := mustMutate(t, m, pod("p", map[string]string{otherDriver: "1", "nvidia.com/gpu": "1"}))
	if !res.Allowed {
		t.Fatalf("denied: %s", res.Message)
	}
	if q := res.Pod.Spec.Containers[0].Resources.Limits[otherDriver]; q.String() != "1" {
		t.Errorf("%s = %s after mutation, want 1 as written", otherDriver, q.String())
	}
	again := mustMutate(t, m, res.Pod.DeepCopy())
	if !again.Allowed || len(again.Patch) > 0 {
		t.Errorf("the sealed pod came back: allowed %v, patch %v (%s); want allowed unchanged", again.Allowed, again.Patch, again.Message)
	}
}
