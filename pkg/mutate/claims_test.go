package mutate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/claim"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// draMutator decides on one DRA node of two shareable H100s (1 GiB steps).
func draMutator() *Mutator {
	// The DRA agent advertises its GPUs' memory as accounting capacity.
	n := gpuNode("dra-0", "NVIDIA-H100-80GB-HBM3", map[string]string{allocator.LabelNodeMode: allocator.NodeModeDRA},
		map[string]int64{"gpuadmit.io/gpu-memory-mib": 2 * 81559, "gpuadmit.io/h100-80gb-mib": 2 * 81559})
	gpu := func(name string) resourceapi.Device {
		gib := resource.MustParse("1Gi")
		return resourceapi.Device{Name: name, AllowMultipleAllocations: ptr.To(true),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"type": {StringValue: ptr.To("gpu")}, "model": {StringValue: ptr.To("H100-80GB")}},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {
				Value:         resource.MustParse("81559Mi"),
				RequestPolicy: &resourceapi.CapacityRequestPolicy{ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: &gib, Step: &gib}},
			}},
		}
	}
	s := resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: allocator.DRADriver, NodeName: ptr.To("dra-0"),
		Pool: resourceapi.ResourcePool{Name: "dra-0", Generation: 1, ResourceSliceCount: 1}, Devices: []resourceapi.Device{gpu("gpu-0"), gpu("gpu-1")}}}
	inv := inventory.BuildWithSlices([]corev1.Node{n}, []resourceapi.ResourceSlice{s}, allocator.Default())
	return NewMutator(defaultEngine, StaticInventory{Inv: inv}, MutatorOptions{})
}

type podClaims struct {
	Pod        map[string]string   // claim → template
	Containers map[string][]string // container → its claims
}

func claimsOf(p *corev1.Pod) podClaims {
	out := podClaims{Pod: map[string]string{}, Containers: map[string][]string{}}
	for _, c := range p.Spec.ResourceClaims {
		out.Pod[c.Name] = ptr.Deref(c.ResourceClaimTemplateName, "")
	}
	for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range list {
			for _, rc := range c.Resources.Claims {
				out.Containers[c.Name] = append(out.Containers[c.Name], rc.Name)
			}
		}
	}
	return out
}

func TestDRASharesBecomeClaims(t *testing.T) {
	shared := map[string]string{"gpuadmit.io/backend": "shared"}
	tests := map[string]struct {
		pod  func() *corev1.Pod
		want podClaims
	}{
		"10 GiB is a claim of 10240 MiB from gpuadmit's template": {
			pod: func() *corev1.Pod { return pod("p", map[string]string{"gpuadmit.io/gpu-memory": "10Gi"}) },
			want: podClaims{Pod: map[string]string{"gpuadmit-a": claim.TemplateName(10240)},
				Containers: map[string][]string{"a": {"gpuadmit-a"}}},
		},
		"3000 MiB rounds up to the driver's 1 GiB step": {
			pod: func() *corev1.Pod { return pod("p", map[string]string{"nvidia.com/gpumem": "3000"}) },
			want: podClaims{Pod: map[string]string{"gpuadmit-a": claim.TemplateName(3072)},
				Containers: map[string][]string{"a": {"gpuadmit-a"}}},
		},
		"a fraction of 1 is every whole GiB of one GPU": {
			pod: func() *corev1.Pod {
				return pod("p", map[string]string{"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "100"})
			},
			want: podClaims{Pod: map[string]string{"gpuadmit-a": claim.TemplateName(79 * 1024)},
				Containers: map[string][]string{"a": {"gpuadmit-a"}}},
		},
		"a 20 GiB init container shares the 10 GiB app container's claim, sized 20 GiB": {
			pod: func() *corev1.Pod {
				p := pod("p", map[string]string{"gpuadmit.io/gpu-memory": "10Gi"})
				p.Spec.InitContainers = []corev1.Container{{Name: "warm", Image: "busybox",
					Resources: corev1.ResourceRequirements{Limits: list(map[string]string{"gpuadmit.io/gpu-memory": "20Gi"})}}}
				return p
			},
			want: podClaims{Pod: map[string]string{"gpuadmit-a": claim.TemplateName(20480)},
				Containers: map[string][]string{"a": {"gpuadmit-a"}, "warm": {"gpuadmit-a"}}},
		},
		"two app containers hold a claim each": {
			pod: func() *corev1.Pod {
				return pod("p", map[string]string{"gpuadmit.io/gpu-memory": "10Gi"}, map[string]string{"gpuadmit.io/gpu-memory": "4Gi"})
			},
			want: podClaims{Pod: map[string]string{"gpuadmit-a": claim.TemplateName(10240), "gpuadmit-b": claim.TemplateName(4096)},
				Containers: map[string][]string{"a": {"gpuadmit-a"}, "b": {"gpuadmit-b"}}},
		},
	}
	m := draMutator()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := tc.pod()
			p.Annotations = shared
			res := mustMutate(t, m, p)
			if !res.Allowed {
				t.Fatalf("denied: %s", res.Message)
			}
			if diff := cmp.Diff(tc.want, claimsOf(res.Pod)); diff != "" {
				t.Errorf("claims (-want +got):\n%s", diff)
			}
			for _, c := range res.Pod.Spec.Containers {
				for r := range c.Resources.Limits {
					if r == "gpuadmit.io/gpu-mem" || r == "gpuadmit.io/gpu-memory" {
						t.Errorf("container %s keeps %s beside its claim", c.Name, r)
					}
				}
			}
			again := mustMutate(t, m, res.Pod)
			if !again.Allowed || len(again.Patch) != 0 {
				t.Errorf("the admitted pod, submitted again: allowed %v, patch %v, %s", again.Allowed, again.Patch, again.Message)
			}
		})
	}
}

func TestDRAClaimsCannotBeForged(t *testing.T) {
	m := draMutator()
	p := pod("p", map[string]string{"gpuadmit.io/gpu-memory": "10Gi"})
	p.Annotations = map[string]string{"gpuadmit.io/backend": "shared"}
	res := mustMutate(t, m, p)
	if !res.Allowed {
		t.Fatalf("denied: %s", res.Message)
	}

	bigger := res.Pod.DeepCopy()
	bigger.Spec.ResourceClaims[0].ResourceClaimTemplateName = ptr.To(claim.TemplateName(81920))
	if got := mustMutate(t, m, bigger); got.Allowed {
		t.Error("a record with a larger claim than gpuadmit wrote was admitted")
	}

	bare := pod("q")
	bare.Spec.Containers = []corev1.Container{{Name: "a", Image: "busybox", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}}
	bare.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(claim.TemplateName(10240))}}
	got := mustMutate(t, m, bare)
	if got.Allowed || !strings.Contains(got.Message, "spec.resourceClaims[0].resourceClaimTemplateName") {
		t.Errorf("a pod using gpuadmit's template on its own: allowed %v, %q", got.Allowed, got.Message)
	}
}

// A fraction is never given less memory than it asks: 0.995 of an 81559 MiB
// H100 is 81152 MiB, over the 79 GiB a claim of one GPU can have, so it is
// not a share (it used to be cut down to 79 GiB).
func TestDRAFractionIsNeverCutDown(t *testing.T) {
	p := pod("p", map[string]string{"gpuadmit.io/gpu": "995m"})
	p.Annotations = map[string]string{"gpuadmit.io/backend": "shared"}
	res := mustMutate(t, draMutator(), p)
	if res.Allowed || !strings.Contains(res.Message, "80896 MiB a share of one 81559 MiB GPU can have") {
		t.Errorf("allowed %v (claims %v), %q; want a denial naming the most a share can have", res.Allowed, claimsOf(res.Pod), res.Message)
	}
}
