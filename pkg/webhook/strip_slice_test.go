package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/gpuadmit/gpuadmit/pkg/agent/dra"
	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/usage"
)

// sliceTransform is the transform the manager's cache of a process of
// role r applies to ResourceSlices.
func sliceTransform(t testing.TB, r Role) toolscache.TransformFunc {
	t.Helper()
	o := cacheOptions(context.Background(), Options{Role: r, SchedulerLeaseNamespace: "gpuadmit-system"})
	for obj, by := range o.ByObject {
		if _, ok := obj.(*resourceapi.ResourceSlice); ok && by.Transform != nil {
			return by.Transform
		}
	}
	return o.DefaultTransform
}

// catalogGPUs are n GPUs of catalog model name as the agent's discovery
// reports them, MIG off; uuidBase tells two nodes' GPUs apart.
func catalogGPUs(t testing.TB, name string, n, uuidBase int) []allocator.NodeGPU {
	t.Helper()
	m, ok := allocator.Default().Model(name)
	if !ok {
		t.Fatalf("no catalog model %s", name)
	}
	mode := allocator.MIGUnsupported
	if len(m.Profiles) > 0 {
		mode = allocator.MIGDisabled
	}
	out := make([]allocator.NodeGPU, n)
	for i := range out {
		out[i] = allocator.NodeGPU{Index: i, UUID: fmt.Sprintf("GPU-%08d-0000-0000-0000-%012d", uuidBase, i),
			Product: m.Products[len(m.Products)-1], Model: m.Name, Known: true, MemoryMiB: m.MemoryMiB,
			MIGMode: mode, Profiles: m.Profiles, Healthy: true}
	}
	return out
}

// withMIG turns MIG on for gpus with one instance per profile given, at
// that profile's placements in turn; GI ids count from 1.
func withMIG(t testing.TB, gpus []allocator.NodeGPU, profiles ...string) []allocator.NodeGPU {
	t.Helper()
	for i := range gpus {
		m, _ := allocator.Default().Model(gpus[i].Model)
		gpus[i].MIGMode = allocator.MIGEnabled
		used := map[string]int{}
		for n, name := range profiles {
			p, ok := m.Profile(name)
			if !ok {
				t.Fatalf("%s has no MIG profile %s", m.Name, name)
			}
			gpus[i].Instances = append(gpus[i].Instances, allocator.MIGInstance{ID: n + 1, Profile: p.Name,
				Placement: p.Placements[used[name]%len(p.Placements)], MemoryMiB: p.MemoryMiB})
			used[name]++
		}
	}
	return gpus
}

// migUUIDsOf names every MIG instance of gpus, as the agent reads them from NVML.
func migUUIDsOf(gpus []allocator.NodeGPU) map[dra.InstanceKey]string {
	out := map[dra.InstanceKey]string{}
	for _, g := range gpus {
		for _, in := range g.Instances {
			out[dra.InstanceKey{GPU: g.UUID, GI: in.ID}] = fmt.Sprintf("MIG-%s-%d", g.UUID[4:], in.ID)
		}
	}
	return out
}

// agentSlices are the ResourceSlices the ResourceSlice controller writes
// for one node's devices (dra.Resources) at a generation, with the owner
// reference to the Node it adds, decoded from JSON as the informer holds them.
func agentSlices(node string, gen int64, devs []resourceapi.Device) []*resourceapi.ResourceSlice {
	var out []*resourceapi.ResourceSlice
	for pool, p := range dra.Resources(node, devs).Pools {
		for i, s := range p.Slices {
			rs := &resourceapi.ResourceSlice{}
			rs.Name, rs.UID, rs.ResourceVersion = fmt.Sprintf("%s-%s-g%d-%d", node, dra.DriverName, gen, i), "5e1f", "812"
			rs.GenerateName = node + "-" + dra.DriverName + "-"
			rs.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: "9a7c", Controller: ptr.To(true)}}
			rs.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "gpuadmit-agent", Operation: metav1.ManagedFieldsOperationApply}}
			rs.Spec = resourceapi.ResourceSliceSpec{Driver: dra.DriverName, NodeName: ptr.To(node), Devices: s.Devices,
				Pool: resourceapi.ResourcePool{Name: pool, Generation: gen, ResourceSliceCount: int64(len(p.Slices))}}
			out = append(out, decodedSlice(rs))
		}
	}
	return out
}

// decodedSlice is s as an informer holds it: decoded from JSON.
func decodedSlice(s *resourceapi.ResourceSlice) *resourceapi.ResourceSlice {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	out := &resourceapi.ResourceSlice{}
	if err := json.Unmarshal(b, out); err != nil {
		panic(err)
	}
	return out
}

// draFleet is one node of every kind of device the agent publishes, its
// slices and claims allocated on them:
//   - dra-share: 8 H100s shared in 1 GiB steps (request policy,
//     allowMultipleAllocations), one unhealthy (tainted NoSchedule), and a
//     device prepared claims hold that is gone (the driver's TaintGone
//     device: name, memory, taint); its previous generation's slice is
//     still there;
//   - dra-mig: 2 H100s in MIG, mixed profiles, the MIG devices' UUIDs known;
//   - dra-mig-nouuid: an H200 in MIG, the MIG UUIDs not known;
//   - dra-whole: 4 T4s too small to share at a 10 GiB step (whole devices);
//   - dra-unknown: an L40S whose product the catalog does not know.
func draFleet(t testing.TB) (nodes []corev1.Node, slices []*resourceapi.ResourceSlice, claims []resourceapi.ResourceClaim) {
	t.Helper()
	node := func(name, product string) corev1.Node {
		n := corev1.Node{}
		n.Name = name
		n.Labels = map[string]string{inventory.LabelProduct: product, allocator.LabelNodeMode: allocator.NodeModeDRA}
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("96"), corev1.ResourceMemory: resource.MustParse("1Ti")}
		return n
	}
	share := catalogGPUs(t, "H100-80GB", 8, 1)
	share[7].Healthy = false
	shareDevs := dra.Devices(share, dra.DeviceOptions{})
	shareDevs = append(shareDevs, resourceapi.Device{Name: dra.GPUDeviceName(9),
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{dra.CapacityMemory: {Value: *resource.NewQuantity(81559<<20, resource.BinarySI)}},
		Taints:   []resourceapi.DeviceTaint{{Key: dra.TaintGone, Effect: resourceapi.DeviceTaintEffectNoExecute}}})
	mig := withMIG(t, catalogGPUs(t, "H100-80GB", 2, 2), "3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb")
	migDevs := dra.Devices(mig, dra.DeviceOptions{MIGUUIDs: migUUIDsOf(mig)})
	noUUID := withMIG(t, catalogGPUs(t, "H200-141GB", 1, 3), "4g.71gb", "3g.71gb")
	noUUIDDevs := dra.Devices(noUUID, dra.DeviceOptions{})
	wholeDevs := dra.Devices(catalogGPUs(t, "T4", 4, 4), dra.DeviceOptions{ShareUnitMiB: 10240})
	unknown := catalogGPUs(t, "L40S", 2, 5)
	for i := range unknown {
		unknown[i].Product, unknown[i].Model, unknown[i].Known = "NVIDIA RTX 6000 Ada Generation", "NVIDIA-RTX-6000-Ada-Generation", false
	}
	unknownDevs := dra.Devices(unknown, dra.DeviceOptions{})

	nodes = []corev1.Node{node("dra-share", "NVIDIA-H100-80GB-HBM3"), node("dra-mig", "NVIDIA-H100-80GB-HBM3"),
		node("dra-mig-nouuid", "NVIDIA-H200"), node("dra-whole", "Tesla-T4"), node("dra-unknown", "NVIDIA-RTX-6000-Ada-Generation")}
	slices = append(slices, agentSlices("dra-share", 1, shareDevs[:3])...)
	slices = append(slices, agentSlices("dra-share", 2, shareDevs)...)
	slices = append(slices, agentSlices("dra-mig", 1, migDevs)...)
	slices = append(slices, agentSlices("dra-mig-nouuid", 1, noUUIDDevs)...)
	slices = append(slices, agentSlices("dra-whole", 1, wholeDevs)...)
	slices = append(slices, agentSlices("dra-unknown", 1, unknownDevs)...)

	claim := func(pod, pool, device string, consumedMiB int64) resourceapi.ResourceClaim {
		c := resourceapi.ResourceClaim{}
		c.Namespace, c.Name = "ml", pod+"-gpu"
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod, Controller: ptr.To(true)}}
		r := resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: dra.DriverName, Pool: pool, Device: device}
		if consumedMiB > 0 {
			r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{dra.CapacityMemory: *resource.NewQuantity(consumedMiB<<20, resource.BinarySI)}
		}
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{r}}}
		return c
	}
	claims = []resourceapi.ResourceClaim{
		claim("share-0", "dra-share", shareDevs[0].Name, 20480), claim("share-1", "dra-share", shareDevs[0].Name, 10240),
		claim("gone-0", "dra-share", dra.GPUDeviceName(9), 0), claim("mig-0", "dra-mig", migDevs[0].Name, 0),
		claim("mig-1", "dra-mig", migDevs[len(migDevs)-1].Name, 0), claim("mig-2", "dra-mig-nouuid", noUUIDDevs[0].Name, 0),
		claim("t4-0", "dra-whole", wholeDevs[1].Name, 0), claim("ada-0", "dra-unknown", unknownDevs[0].Name, 0),
	}
	return nodes, slices, claims
}

func stripSlices(t testing.TB, tr toolscache.TransformFunc, in []*resourceapi.ResourceSlice) []resourceapi.ResourceSlice {
	t.Helper()
	out := make([]resourceapi.ResourceSlice, len(in))
	for i, s := range in {
		got, err := tr(s.DeepCopy())
		if err != nil {
			t.Fatalf("transform %s: %v", s.Name, err)
		}
		out[i] = *got.(*resourceapi.ResourceSlice)
	}
	return out
}

func values(in []*resourceapi.ResourceSlice) []resourceapi.ResourceSlice {
	out := make([]resourceapi.ResourceSlice, len(in))
	for i, s := range in {
		out[i] = *s
	}
	return out
}

// TestStripSliceKeepsWhatTheReadersRead: the inventory built from the
// cache's stripped slices equals the one built from the whole ones in
// every role, and where the role runs the usage report (it reconciles) so
// do the report's GPUs and the pods' claims, for every kind of device the
// agent publishes (draFleet).
func TestStripSliceKeepsWhatTheReadersRead(t *testing.T) {
	nodes, slices, claims := draFleet(t)
	whole := values(slices)
	wantInv := inventory.BuildWithSlices(nodes, whole, nil)
	for _, role := range Roles {
		t.Run(string(role), func(t *testing.T) {
			stripped := stripSlices(t, sliceTransform(t, role), slices)
			gotInv := inventory.BuildWithSlices(nodes, stripped, nil)
			opts := cmp.Options{cmpopts.IgnoreUnexported(inventory.Inventory{}, inventory.Pool{}, inventory.Node{}), cmpopts.EquateEmpty()}
			if diff := cmp.Diff(wantInv, gotInv, opts); diff != "" {
				t.Errorf("the inventory differs on stripped slices (-whole +stripped):\n%s", diff)
			}
			if !role.reconciles() {
				return
			}
			if diff := cmp.Diff(usage.DRAGPUs(whole, claims), usage.DRAGPUs(stripped, claims)); diff != "" {
				t.Errorf("usage.DRAGPUs differs on stripped slices (-whole +stripped):\n%s", diff)
			}
			if diff := cmp.Diff(usage.PodClaims(whole, claims), usage.PodClaims(stripped, claims)); diff != "" {
				t.Errorf("usage.PodClaims differs on stripped slices (-whole +stripped):\n%s", diff)
			}
		})
	}

	// The fixture reaches what each reader reads: a shared pool with its
	// step, MIG pools, a whole pool, every claim placed, GPUs named.
	var shared, migPools, wholePools int
	for _, p := range wantInv.Pools {
		switch {
		case !p.DRA:
			t.Errorf("pool %s is not a DRA pool", p.Name)
		case p.Mode == inventory.Whole && p.ShareUnitMiB > 0:
			shared++
		case p.Mode == inventory.Whole:
			wholePools++
		default:
			migPools++
		}
	}
	if shared == 0 || migPools < 2 || wholePools == 0 {
		t.Errorf("the fixture builds %d shared, %d MIG and %d whole DRA pools; the test means at least 1, 2 and 1:\n%v",
			shared, migPools, wholePools, wantInv.Pools)
	}
	if pc := usage.PodClaims(whole, claims); len(pc) != len(claims) {
		t.Errorf("PodClaims placed %d of the fixture's %d claims: %v", len(pc), len(claims), pc)
	}
	var named, unnamed int
	for _, gpus := range usage.DRAGPUs(whole, claims) {
		for _, g := range gpus {
			if g.UUID == "" {
				unnamed++
			} else {
				named++
			}
		}
	}
	if unnamed != 1 || named == 0 { // the gone device has no UUID
		t.Errorf("usage.DRAGPUs names %d devices by UUID and %d not; the fixture means all but the gone device", named, unnamed)
	}
}

// TestStripSliceDropsTheRest: exactly the name, UID, resourceVersion, the
// driver, node and pool, and of each device its name, the type, model and
// profile attributes (and in a role that reconciles its uuid and
// parentUUID), the memory capacity with its step and
// allowMultipleAllocations remain.
func TestStripSliceDropsTheRest(t *testing.T) {
	gpus := withMIG(t, catalogGPUs(t, "H100-80GB", 1, 1), "3g.40gb")
	gpus = append(gpus, catalogGPUs(t, "H100-80GB", 2, 2)[1])
	gpus[1].Healthy = false
	devs := dra.Devices(gpus, dra.DeviceOptions{MIGUUIDs: migUUIDsOf(gpus)})
	if len(devs) != 2 || len(devs[1].Taints)+len(devs[0].Taints) != 1 || devs[0].Attributes["product"].StringValue == nil {
		t.Fatalf("the fixture means a MIG device and a tainted shared GPU with a product attribute: %+v", devs)
	}
	in := agentSlices("n", 3, devs)[0]
	str := func(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: ptr.To(s)} }
	mem := func(mib int64) resource.Quantity { return *resource.NewQuantity(mib<<20, resource.BinarySI) }
	for role, ids := range map[Role]bool{RoleWebhook: false, RoleController: true, RoleAll: true} {
		want := resourceapi.ResourceSlice{}
		want.Name, want.UID, want.ResourceVersion = in.Name, "5e1f", "812"
		want.Spec = resourceapi.ResourceSliceSpec{Driver: dra.DriverName, NodeName: ptr.To("n"),
			Pool: resourceapi.ResourcePool{Name: "n", Generation: 3, ResourceSliceCount: 1}}
		for _, d := range devs {
			w := resourceapi.Device{Name: d.Name, AllowMultipleAllocations: d.AllowMultipleAllocations}
			if *d.Attributes["type"].StringValue == "mig" {
				w.Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"type": str("mig"), "model": str("H100-80GB"), "profile": str("3g.40gb")}
				if ids {
					w.Attributes["uuid"] = str(migUUIDsOf(gpus)[dra.InstanceKey{GPU: gpus[0].UUID, GI: 1}])
					w.Attributes["parentUUID"] = str(gpus[0].UUID)
				}
				w.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: mem(40448)}}
			} else {
				w.Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"type": str("gpu"), "model": str("H100-80GB")}
				if ids {
					w.Attributes["uuid"] = str(gpus[1].UUID)
				}
				w.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: mem(81559),
					RequestPolicy: &resourceapi.CapacityRequestPolicy{ValidRange: &resourceapi.CapacityRequestPolicyRange{Step: ptr.To(mem(1024))}}}}
			}
			want.Spec.Devices = append(want.Spec.Devices, w)
		}
		tr := sliceTransform(t, role)
		got := stripSlices(t, tr, []*resourceapi.ResourceSlice{in})[0]
		if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
			t.Errorf("%s: stripped slice (-want +got):\n%s", role, diff)
		}
		if tomb, _ := tr("tombstone"); tomb != "tombstone" {
			t.Errorf("%s: a non-ResourceSlice came back as %v", role, tomb)
		}
	}
}

// TestSliceTransformSharesMapsOfLikeDevices: devices of one kind on
// different nodes share one capacity map, and in a serving replica (which
// keeps no UUID) one attribute map; devices of another kind get their own.
func TestSliceTransformSharesMapsOfLikeDevices(t *testing.T) {
	same := func(a, b any) bool { return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() }
	for role, sharesAttrs := range map[Role]bool{RoleWebhook: true, RoleController: false} {
		tr := sliceTransform(t, role)
		var devs [][]resourceapi.Device
		for i := range 2 {
			gpus := withMIG(t, catalogGPUs(t, "H100-80GB", 1, i), "3g.40gb", "3g.40gb")
			slices := stripSlices(t, tr, agentSlices(fmt.Sprintf("n-%d", i), 1, dra.Devices(gpus, dra.DeviceOptions{MIGUUIDs: migUUIDsOf(gpus)})))
			devs = append(devs, slices[0].Spec.Devices)
		}
		a, b := devs[0][0], devs[1][1]
		if !same(a.Capacity, b.Capacity) {
			t.Errorf("%s: two 3g.40gb devices have capacity maps of their own", role)
		}
		if got := same(a.Attributes, b.Attributes); got != sharesAttrs {
			t.Errorf("%s: two 3g.40gb devices share one attribute map: %v, want %v", role, got, sharesAttrs)
		}
		other := stripSlices(t, tr, agentSlices("n-2", 1, dra.Devices(catalogGPUs(t, "H100-80GB", 1, 2), dra.DeviceOptions{})))[0].Spec.Devices[0]
		if same(other.Capacity, a.Capacity) || same(other.Attributes, a.Attributes) {
			t.Errorf("%s: a whole GPU shares a 3g.40gb device's maps", role)
		}
	}
}
