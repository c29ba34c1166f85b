package placement

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

const gibi = int64(1) << 30

// classes is the driver's DeviceClasses as pkg/agent/dra.DeviceClasses
// writes them, for the MIG profiles used here.
type classes map[string]*resourceapi.DeviceClass

func (c classes) List() ([]*resourceapi.DeviceClass, error) {
	var out []*resourceapi.DeviceClass
	for _, dc := range c {
		out = append(out, dc)
	}
	return out, nil
}

func (c classes) Get(name string) (*resourceapi.DeviceClass, error) {
	if dc, ok := c[name]; ok {
		return dc, nil
	}
	return nil, fmt.Errorf("no DeviceClass %s", name)
}

func driverClasses(profiles ...string) classes {
	d := allocator.DRADriver
	gpu := fmt.Sprintf("device.driver == %q && device.attributes[%q].%s == %q", d, d, allocator.DRAAttrType, allocator.DRATypeGPU)
	mk := func(name, expr string) *resourceapi.DeviceClass {
		return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}}}
	}
	c := classes{allocator.DRAClassGPU: mk(allocator.DRAClassGPU, gpu), allocator.DRAClassShare: mk(allocator.DRAClassShare, gpu)}
	for _, p := range profiles {
		c[allocator.DRAMIGClass(p)] = mk(allocator.DRAMIGClass(p), fmt.Sprintf("device.driver == %q && device.attributes[%q].%s == %q && device.attributes[%q].%s == %q",
			d, d, allocator.DRAAttrType, allocator.DRATypeMIG, d, allocator.DRAAttrProfile, p))
	}
	return c
}

// agentSlice is a node's slice as gpuadmit's DRA agent publishes it: MIG
// instances (migs: profile → count) first, the smaller devices, then
// gpus GPUs of model with gibs GiB each, shared in steps of 1 GiB.
func agentSlice(node, model string, gpus int, gibs int64, migs map[string]int) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-slice"}}
	s.Spec.Driver, s.Spec.NodeName = allocator.DRADriver, ptr.To(node)
	s.Spec.Pool = resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}
	str := func(v string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: ptr.To(v)} }
	for _, p := range sets.List(sets.KeySet(migs)) {
		for i := range migs[p] {
			s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{
				Name: fmt.Sprintf("mig-%s-%d", strings.ReplaceAll(p, ".", "-"), i),
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
					allocator.DRAAttrType: str(allocator.DRATypeMIG), allocator.DRAAttrModel: str(model), allocator.DRAAttrProfile: str(p)},
				Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{allocator.DRACapacityMemory: {Value: *resource.NewQuantity(10*gibi, resource.BinarySI)}},
			})
		}
	}
	for i := range gpus {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{
			Name:                     fmt.Sprintf("gpu-%d", i),
			AllowMultipleAllocations: ptr.To(true),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				allocator.DRAAttrType: str(allocator.DRATypeGPU), allocator.DRAAttrModel: str(model)},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{allocator.DRACapacityMemory: {
				Value: *resource.NewQuantity(gibs*gibi, resource.BinarySI),
				RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: resource.NewQuantity(gibs*gibi, resource.BinarySI),
					ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: resource.NewQuantity(gibi, resource.BinarySI), Step: resource.NewQuantity(gibi, resource.BinarySI)}},
			}},
		})
	}
	return s
}

// alt is an alternative as pkg/claim.Alternative: backend, model, MIG
// profile, count, share GiB.
type alt struct {
	backend, model, profile string
	count, gibs             int64
}

// altClaim is a claim of one request "gpu" with alts as firstAvailable
// subrequests, as pkg/claim.AlternativesSpec writes it (the scheduler
// module cannot import pkg/claim, which brings controller-runtime).
func altClaim(name string, alts ...alt) *resourceapi.ResourceClaim {
	subs := make([]resourceapi.DeviceSubRequest, len(alts))
	for i, a := range alts {
		s := resourceapi.DeviceSubRequest{Name: fmt.Sprintf("%s%d", a.backend, i), AllocationMode: resourceapi.DeviceAllocationModeExactCount,
			Count: max(a.count, 1), Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: fmt.Sprintf("device.attributes[%q].%s == %q", allocator.DRADriver, allocator.DRAAttrModel, a.model)}}}}
		switch a.backend {
		case "mig":
			s.DeviceClassName = allocator.DRAMIGClass(a.profile)
		case "shared":
			s.DeviceClassName, s.Count = allocator.DRAClassShare, 1
			s.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
				allocator.DRACapacityMemory: *resource.NewQuantity(a.gibs*gibi, resource.BinarySI)}}
		default:
			s.DeviceClassName = allocator.DRAClassGPU
		}
		subs[i] = s
	}
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name)}}
	c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", FirstAvailable: subs}}
	return c
}

// allocated is the state of one node's allocations, as the plugin (held)
// and as the structured allocator (AllocatedState) read it.
type allocated struct {
	held  held
	state structured.AllocatedState
}

func (a *allocated) add(r *resourceapi.AllocationResult) {
	a.held.add(r)
	for _, d := range r.Devices.Results {
		id := structured.MakeDeviceID(d.Driver, d.Pool, d.Device)
		if d.ShareID == nil {
			a.state.AllocatedDevices.Insert(id)
			continue
		}
		a.state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, d.ShareID))
		a.state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, d.ConsumedCapacity))
	}
}

// bench is one node's slice and allocations, on which placements are made
// both by the plugin's prediction and by the real structured allocator
// (the one DynamicResources runs, with the features gpuadmit's clusters
// enable).
type bench struct {
	slice    *resourceapi.ResourceSlice
	node     *corev1.Node
	gpuNames []string // the view's GPUs, by index
	a        *allocated
}

func newBench(slice *resourceapi.ResourceSlice) *bench {
	b := &bench{slice: slice, node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: *slice.Spec.NodeName}},
		a: &allocated{state: structured.AllocatedState{AllocatedDevices: sets.New[structured.DeviceID](),
			AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](), AggregatedCapacity: structured.NewConsumedCapacityCollection()}}}
	for _, d := range slice.Spec.Devices {
		if attr(d, allocator.DRAAttrType) == allocator.DRATypeGPU {
			b.gpuNames = append(b.gpuNames, d.Name)
		}
	}
	return b
}

// place places a pod of claims (one per container, each listing alts)
// with the allocator, fails t where the prediction differs from what the
// allocator allocates (no fit; else the alternative of each claim and the
// GPU of each share or whole GPU), keeps the allocation, and returns the
// prediction.
func (b *bench) place(t *testing.T, name string, pod [][]alt) (prediction, bool) {
	t.Helper()
	ctx := context.Background()
	var claims []*resourceapi.ResourceClaim
	var cs []choice
	for j, alts := range pod {
		c := altClaim(fmt.Sprintf("%s-%d", name, j), alts...)
		claims = append(claims, c)
		ch, ok := listChoice(c.Spec.Devices.Requests[0].FirstAvailable)
		if !ok {
			t.Fatalf("claim %s: the plugin cannot size it", c.Name)
		}
		cs = append(cs, ch)
	}
	got, ok := draView([]*resourceapi.ResourceSlice{b.slice}, b.a.held).predict(cs)
	features := structured.Features{PrioritizedList: true, ConsumableCapacity: true, PartitionableDevices: true, DeviceTaints: true}
	alloc, err := structured.NewAllocator(ctx, features, b.a.state, driverClasses("1g.10gb", "3g.40gb"),
		[]*resourceapi.ResourceSlice{b.slice}, cel.NewCache(10, cel.Features{}))
	if err != nil {
		t.Fatal(err)
	}
	results, err := alloc.Allocate(ctx, b.node, claims)
	if err != nil {
		t.Fatalf("%s on %s: Allocate: %v", name, b.node.Name, err)
	}
	if (results != nil) != ok {
		t.Fatalf("%s on %s: predicted fit %v (%+v), the allocator allocated %+v", name, b.node.Name, ok, got, results)
	}
	if !ok {
		return got, false
	}
	var wantAlts []int
	var wantDevices, gotDevices []string
	for ci, r := range results {
		for _, d := range r.Devices.Results {
			_, sub, _ := strings.Cut(d.Request, "/")
			idx := -1
			for i, s := range claims[ci].Spec.Devices.Requests[0].FirstAvailable {
				if s.Name == sub {
					idx = i
				}
			}
			if len(wantAlts) <= ci {
				wantAlts = append(wantAlts, idx)
			}
			if !strings.HasPrefix(d.Device, "mig-") {
				wantDevices = append(wantDevices, d.Device)
			}
		}
	}
	for _, g := range got.at {
		gotDevices = append(gotDevices, b.gpuNames[g])
	}
	if fmt.Sprint(got.alts) != fmt.Sprint(wantAlts) || fmt.Sprint(gotDevices) != fmt.Sprint(wantDevices) {
		t.Fatalf("%s on %s: predicted alternatives %v on GPUs %v, the allocator chose %v on %v", name, b.node.Name, got.alts, gotDevices, wantAlts, wantDevices)
	}
	for i := range results {
		b.a.add(&results[i])
	}
	return got, true
}

// TestPredictionIsWhatTheAllocatorAllocates fills nodes of two models, one
// pod at a time, with pods whose claims list alternatives, and checks at
// every step that the plugin's prediction on the node is what the real
// structured allocator allocates there on the same slices and allocated
// claims (see bench.place). The pods cover MIG, share and whole-GPU
// alternatives, each tied to a model, and a pod of two claims.
func TestPredictionIsWhatTheAllocatorAllocates(t *testing.T) {
	slices := []*resourceapi.ResourceSlice{
		agentSlice("a100", "A100-40GB", 4, 40, nil),
		agentSlice("h100", "H100-80GB", 2, 80, map[string]int{"1g.10gb": 3, "3g.40gb": 1}),
		agentSlice("h100-mig", "H100-80GB", 0, 0, map[string]int{"1g.10gb": 7}),
	}
	pods := [][][]alt{
		{{{"mig", "H100-80GB", "1g.10gb", 1, 0}, {"shared", "A100-40GB", "", 1, 10}, {"whole", "A100-40GB", "", 1, 0}}},
		{{{"shared", "H100-80GB", "", 1, 30}, {"shared", "A100-40GB", "", 1, 30}}},
		{{{"whole", "A100-40GB", "", 2, 0}, {"whole", "H100-80GB", "", 1, 0}, {"shared", "A100-40GB", "", 1, 20}}},
		{{{"shared", "A100-40GB", "", 1, 5}, {"shared", "H100-80GB", "", 1, 5}}},
		{ // two containers, a claim each
			{{"shared", "A100-40GB", "", 1, 35}, {"shared", "H100-80GB", "", 1, 35}, {"mig", "H100-80GB", "3g.40gb", 1, 0}},
			{{"shared", "A100-40GB", "", 1, 10}, {"mig", "H100-80GB", "1g.10gb", 1, 0}, {"shared", "H100-80GB", "", 1, 50}},
		},
		{{{"mig", "H100-80GB", "3g.40gb", 1, 0}, {"whole", "H100-80GB", "", 1, 0}, {"shared", "A100-40GB", "", 1, 40}}},
	}
	compared, fitted, later := 0, 0, 0
	for _, sl := range slices {
		b := newBench(sl)
		for step := range 40 {
			got, ok := b.place(t, fmt.Sprintf("p%d", step), pods[step%len(pods)])
			compared++
			if ok {
				fitted++
			}
			if ok && got.steps > 0 {
				later++
			}
		}
	}
	// The fill must have exercised what the test is about.
	if fitted < 20 || later < 5 || compared-fitted < 5 {
		t.Fatalf("compared %d placements, %d fitted, %d on a later alternative: too few to prove anything", compared, fitted, later)
	}
	t.Logf("compared %d placements: %d fitted, %d on a later alternative", compared, fitted, later)
}

// TestPredictionBacksUpAsTheAllocatorDoes checks the prediction where the
// allocator's search backs up: a second claim that fits only once the
// first takes its next alternative, and a second share that fits only once
// the first share moves to a later GPU. Each case first checks that its
// fill left the state it is about (a first fit without backing up would
// not fit).
func TestPredictionBacksUpAsTheAllocatorDoes(t *testing.T) {
	t.Run("next alternative of the first claim", func(t *testing.T) {
		b := newBench(agentSlice("h100", "H100-80GB", 2, 80, map[string]int{"1g.10gb": 1}))
		b.place(t, "fill", [][]alt{{{"shared", "H100-80GB", "", 1, 50}}}) // gpu-0: 30 GiB left
		got, ok := b.place(t, "pod", [][]alt{
			{{"shared", "H100-80GB", "", 1, 40}, {"mig", "H100-80GB", "1g.10gb", 1, 0}},
			{{"shared", "H100-80GB", "", 1, 60}},
		})
		if !ok || fmt.Sprint(got.alts) != "[1 0]" {
			t.Fatalf("the case does not back up: predicted %+v, fit %v", got, ok)
		}
	})
	t.Run("a later GPU for the first share", func(t *testing.T) {
		b := newBench(agentSlice("a100", "A100-40GB", 2, 40, nil))
		b.place(t, "fill0", [][]alt{{{"shared", "A100-40GB", "", 1, 28}}}) // gpu-0: 12 GiB left
		b.place(t, "fill1", [][]alt{{{"shared", "A100-40GB", "", 1, 30}}}) // gpu-1: 10 GiB left
		got, ok := b.place(t, "pod", [][]alt{{{"shared", "A100-40GB", "", 1, 10}}, {{"shared", "A100-40GB", "", 1, 12}}})
		if !ok || fmt.Sprint(got.at) != "[1 0]" {
			t.Fatalf("the case does not back up: predicted %+v, fit %v", got, ok)
		}
	})
}

func TestSelectedModelReadsTheWebhooksSelector(t *testing.T) {
	// pkg/claim.ModelSelector("H100-80GB"), as it writes it.
	expr := fmt.Sprintf("device.attributes[%q].%s == %q", allocator.DRADriver, allocator.DRAAttrModel, "H100-80GB")
	if m, ok := selectedModel(expr); !ok || m != "H100-80GB" {
		t.Fatalf("selectedModel(%q) = %q, %v", expr, m, ok)
	}
	for _, bad := range []string{`device.attributes["gpu.gpuadmit.io"].model != "H100-80GB"`, `device.driver == "gpu.gpuadmit.io"`, ""} {
		if _, ok := selectedModel(bad); ok {
			t.Errorf("selectedModel(%q) read a model", bad)
		}
	}
}
