package usage_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
	"github.com/gpuadmit/gpuadmit/pkg/usage"
)

func device(name, uuid, parent string, mib int64) resourceapi.Device {
	d := resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{},
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			allocator.DRACapacityMemory: {Value: *resource.NewQuantity(mib<<20, resource.BinarySI)},
		}}
	if uuid != "" {
		d.Attributes[allocator.DRAAttrUUID] = resourceapi.DeviceAttribute{StringValue: ptr.To(uuid)}
	}
	if parent != "" {
		d.Attributes[allocator.DRAAttrParentUUID] = resourceapi.DeviceAttribute{StringValue: ptr.To(parent)}
	}
	return d
}

func slice(node string, gen int64, devs ...resourceapi.Device) resourceapi.ResourceSlice {
	return resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{
		Driver: allocator.DRADriver, NodeName: ptr.To(node),
		Pool: resourceapi.ResourcePool{Name: node, Generation: gen}, Devices: devs,
	}}
}

func allocated(results ...resourceapi.DeviceRequestAllocationResult) resourceapi.ResourceClaim {
	return resourceapi.ResourceClaim{Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
		Devices: resourceapi.DeviceAllocationResult{Results: results},
	}}}
}

func result(pool, dev string, consumedMiB int64) resourceapi.DeviceRequestAllocationResult {
	r := resourceapi.DeviceRequestAllocationResult{Driver: allocator.DRADriver, Pool: pool, Device: dev, Request: "gpu"}
	if consumedMiB > 0 {
		r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{allocator.DRACapacityMemory: *resource.NewQuantity(consumedMiB<<20, resource.BinarySI)}
	}
	return r
}

func TestDRAGPUs(t *testing.T) {
	slices := []resourceapi.ResourceSlice{
		slice("n1", 1, device("gpu-0", "GPU-old", "", 15360)), // an older generation
		slice("n1", 2, device("gpu-1", "GPU-b", "", 15360), device("gpu-0", "GPU-a", "", 15360)),
		slice("n2", 1, device("mig-0-1", "MIG-x", "GPU-c", 9984), device("mig-0-2", "", "GPU-c", 9984)),
	}
	claims := []resourceapi.ResourceClaim{
		allocated(result("n1", "gpu-0", 9216)),
		allocated(result("n1", "gpu-0", 1024), result("n1", "gpu-1", 9216)),
		allocated(result("n2", "mig-0-2", 0)), // a MIG device is taken whole
		{},                                    // not allocated
		allocated(resourceapi.DeviceRequestAllocationResult{Driver: "other.example.com", Pool: "n1", Device: "gpu-1"}),
	}
	want := map[string][]usage.GPU{
		"n1": {{UUID: "GPU-a", CapacityMiB: 15360, AllocatedMiB: 10240}, {UUID: "GPU-b", CapacityMiB: 15360, AllocatedMiB: 9216}},
		"n2": {{UUID: "GPU-c", CapacityMiB: 9984}, {UUID: "GPU-c", CapacityMiB: 9984, AllocatedMiB: 9984}},
	}
	if diff := cmp.Diff(want, usage.DRAGPUs(slices, claims)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// asking is a claim not yet allocated whose requests ask reqs.
func asking(ns, name string, reqs ...resourceapi.DeviceRequest) resourceapi.ResourceClaim {
	c := resourceapi.ResourceClaim{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: reqs}}}
	c.Namespace, c.Name = ns, name
	return c
}

func exactly(mode resourceapi.DeviceAllocationMode, n int64) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: allocator.DRAClassGPU, AllocationMode: mode, Count: n}}
}

func TestClaimDevices(t *testing.T) {
	two := allocated(result("n1", "gpu-0", 0), result("n1", "gpu-1", 0))
	two.Namespace, two.Name = "a", "two-allocated"
	claims := []resourceapi.ResourceClaim{
		two,
		asking("a", "two-asked", exactly(resourceapi.DeviceAllocationModeExactCount, 2)),
		asking("a", "default-count", exactly("", 0)),
		asking("a", "all", exactly(resourceapi.DeviceAllocationModeAll, 0)),
		asking("a", "first-available", resourceapi.DeviceRequest{Name: "gpu", FirstAvailable: []resourceapi.DeviceSubRequest{
			{Name: "big", DeviceClassName: allocator.DRAClassGPU, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 4},
			{Name: "small", DeviceClassName: allocator.DRAClassGPU, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
		}}),
		asking("a", "two-requests", exactly("", 1), exactly(resourceapi.DeviceAllocationModeExactCount, 3)),
	}
	want := map[string]int64{"a/two-allocated": 2, "a/two-asked": 2, "a/default-count": 1, "a/all": 1, "a/first-available": 4, "a/two-requests": 4}
	if diff := cmp.Diff(want, usage.ClaimDevices(claims)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// A pod with DRA alternatives names no pool in its record and is charged
// its largest alternative (a whole A100 80GB here). Once the scheduler has
// allocated its claim (a 9 GiB share of a T4), and before it binds the
// pod, it holds that share on the node that publishes it: it counts there,
// on that node's pool, at the 9 GiB it holds, and waits on no pool.
// Before, it counted as waiting on none (and as demand on every DRA pool),
// at 80 GiB.
func TestAllocatedAlternativesPodCountsOnItsNodesPool(t *testing.T) {
	nodes := []corev1.Node{t4Node("n1", 2, "32")}
	p := pod("a", "alt", "", 81920, 0, "1")
	p.Annotations[record.AnnotationDecision] = "main: shared0 share 9216 MiB of T4 (pool " + pool + "), whole1 1 GPU of A100-80GB (pool a100-80gb-whole); charged 81920 MiB; alternatives on pools " + pool + ", a100-80gb-whole; revision r1"
	if got := mutate.PoolOf(p); got != "" {
		t.Fatalf("the record names pool %q; a pod with alternatives names none", got)
	}
	c := allocated(result("n1", "gpu-0", 9216))
	c.Namespace, c.Name = "a", "alt-main-x7k2p"
	c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "alt", Controller: ptr.To(true)}}
	slices := []resourceapi.ResourceSlice{slice("n1", 1, device("gpu-0", "GPU-a", "", t4MiB), device("gpu-1", "GPU-b", "", t4MiB))}
	claims := []resourceapi.ResourceClaim{c}
	if diff := cmp.Diff(map[string]usage.PodClaim{"a/alt": {Node: "n1", MiB: 9216}}, usage.PodClaims(slices, claims)); diff != "" {
		t.Fatalf("PodClaims (-want +got):\n%s", diff)
	}
	r := usage.Compute(usage.Input{Inventory: inventory.Build(nodes, allocator.Default()), Nodes: nodes, Pods: []*corev1.Pod{p},
		GPUs: usage.DRAGPUs(slices, claims), ClaimDevices: usage.ClaimDevices(claims), PodClaims: usage.PodClaims(slices, claims)})
	got := poolOf(t, r, pool)
	if diff := cmp.Diff(map[usage.Holder]int64{{Namespace: "a", Form: usage.FormShare}: 9216}, got.Allocated); diff != "" {
		t.Errorf("allocated on %s (-want +got):\n%s", pool, diff)
	}
	if len(got.Pending) != 0 {
		t.Errorf("pending on %s: %v, want none", pool, got.Pending)
	}
	for _, other := range r.Pools {
		if other.Name == usage.NoPool {
			t.Errorf("pending on no pool: %v, want none: the pod's claim is allocated on n1", other.Pending)
		}
	}
}

// A claim made by hand (no pod controls it), or not allocated yet, places
// no pod; a pod's claims on two GPUs (whole, and a share) sum.
func TestPodClaims(t *testing.T) {
	slices := []resourceapi.ResourceSlice{slice("n1", 1, device("gpu-0", "GPU-a", "", t4MiB), device("gpu-1", "GPU-b", "", t4MiB))}
	byHand := allocated(result("n1", "gpu-0", 1024))
	byHand.Namespace, byHand.Name = "a", "mine"
	waiting := asking("a", "w-main-abc", exactly("", 1))
	waiting.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "w", Controller: ptr.To(true)}}
	two := allocated(result("n1", "gpu-0", 0), result("n1", "gpu-1", 2048))
	two.Namespace, two.Name = "a", "two-main-abc"
	two.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "two", Controller: ptr.To(true)}}
	got := usage.PodClaims(slices, []resourceapi.ResourceClaim{byHand, waiting, two})
	if diff := cmp.Diff(map[string]usage.PodClaim{"a/two": {Node: "n1", MiB: t4MiB + 2048}}, got); diff != "" {
		t.Errorf("PodClaims (-want +got):\n%s", diff)
	}
}
