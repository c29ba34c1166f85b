package replay

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpuadmit/gpuadmit/bench/packing"
	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

var (
	t4x2  = packing.Node{Name: "n0", MilliCPU: 32000, MemoryMiB: 65536, GPUs: 2, Model: "T4"}
	share = packing.Pod{Name: "share", MilliCPU: 4000, MemoryMiB: 1024, GPUs: 1, GPUMilli: 460}
	two   = packing.Pod{Name: "two", MilliCPU: 8000, MemoryMiB: 2048, GPUs: 2, GPUMilli: 1000}
	cpu   = packing.Pod{Name: "cpu", MilliCPU: 2000, MemoryMiB: 512}
)

// device is what the representation promises of a published GPU.
type device struct {
	Name                     string
	Shared                   bool
	Capacity, Min, Step, Def string
}

func TestSliceSharesEveryGPUInMilliGPU(t *testing.T) {
	s := Slice(t4x2)
	var got []device
	for _, d := range s.Spec.Devices {
		c := d.Capacity[allocator.DRACapacityMemory]
		dv := device{Name: d.Name, Shared: d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations, Capacity: c.Value.String()}
		if p := c.RequestPolicy; p != nil && p.ValidRange != nil {
			dv.Min, dv.Step, dv.Def = p.ValidRange.Min.String(), p.ValidRange.Step.String(), p.Default.String()
		}
		got = append(got, dv)
	}
	want := []device{
		{Name: "gpu-0", Shared: true, Capacity: "1000Mi", Min: "1Mi", Step: "1Mi", Def: "1000Mi"},
		{Name: "gpu-1", Shared: true, Capacity: "1000Mi", Min: "1Mi", Step: "1Mi", Def: "1000Mi"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("devices (-want +got)\n%s", diff)
	}
	if *s.Spec.NodeName != "n0" || s.Spec.Pool.Name != "n0" || s.Spec.Driver != allocator.DRADriver {
		t.Errorf("slice of node %s, pool %s, driver %s; want n0, n0, %s", *s.Spec.NodeName, s.Spec.Pool.Name, s.Spec.Driver, allocator.DRADriver)
	}
	n := Node(t4x2)
	if got := n.Status.Allocatable[allocator.ResourceMemoryMiB]; got.Value() != 2000 {
		t.Errorf("node's %s = %s, want 2000 (milli-GPU)", allocator.ResourceMemoryMiB, got.String())
	}
}

// asked is what the representation promises of a pod and its claim.
type asked struct {
	Class, Memory string
	Count         int64
	Accounting    string
	ClaimRef      bool
}

func TestPodAndClaimAskWhatTheTracePodAsks(t *testing.T) {
	tests := map[string]struct {
		pod  packing.Pod
		want asked
	}{
		"a share asks its milli-GPU in MiB of one GPU": {pod: share, want: asked{Class: allocator.DRAClassShare, Memory: "460Mi", Count: 1, Accounting: "460", ClaimRef: true}},
		"whole GPUs ask devices, no capacity":          {pod: two, want: asked{Class: allocator.DRAClassGPU, Count: 2, Accounting: "2k", ClaimRef: true}},
		"a pod without GPU has no claim":               {pod: cpu, want: asked{Accounting: "0"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got asked
			if c := Claim("x", tc.pod); c != nil {
				ex := c.Spec.Devices.Requests[0].Exactly
				got.Class, got.Count = ex.DeviceClassName, ex.Count
				if ex.Capacity != nil {
					q := ex.Capacity.Requests[allocator.DRACapacityMemory]
					got.Memory = q.String()
				}
			}
			p := Pod("x", "s", tc.pod)
			acct := p.Spec.Containers[0].Resources.Requests[allocator.ResourceMemoryMiB]
			got.Accounting = acct.String()
			got.ClaimRef = len(p.Spec.ResourceClaims) == 1 && *p.Spec.ResourceClaims[0].ResourceClaimName == "x"
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
			if cpu := p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue(); cpu != tc.pod.MilliCPU {
				t.Errorf("cpu %dm, want %dm", cpu, tc.pod.MilliCPU)
			}
		})
	}
}

func TestPodNamesSortInArrivalOrder(t *testing.T) {
	a, b := PodName(9, share), PodName(10, cpu)
	if a >= b || podIndex(a) != 9 || podIndex(b) != 10 || podIndex("probe") != -1 {
		t.Errorf("names %s, %s read back as %d, %d", a, b, podIndex(a), podIndex(b))
	}
}

// recorder is a simulator policy that remembers where each pod went.
type recorder struct {
	packing.Policy
	placed map[string]Placement
}

func (r recorder) GPUs(n *packing.NodeState, p packing.Pod, rr *rand.Rand) []int {
	g := r.Policy.GPUs(n, p, rr)
	r.placed[p.Name] = Placement{Node: n.Name, GPUs: g}
	return g
}

// TestAccountCountsAsTheSimulator: the simulator places a workload;
// those placements, written as the API server would hold them (pods with
// nodeName, claims with allocation results) and read back, give the
// simulator's own points.
func TestAccountCountsAsTheSimulator(t *testing.T) {
	var nodes []packing.Node
	for i := range 6 {
		nodes = append(nodes, packing.Node{Name: fmt.Sprintf("n%d", i), MilliCPU: 16000, MemoryMiB: 65536, GPUs: 1 + i%2*3, Model: "T4"})
	}
	kinds := []packing.Pod{share, two, cpu, {MilliCPU: 1000, MemoryMiB: 512, GPUs: 1, GPUMilli: 250}, {MilliCPU: 6000, MemoryMiB: 512, GPUs: 1, GPUMilli: 1000}}
	var pods []packing.Pod
	for i := range 40 {
		p := kinds[(i*7)%len(kinds)]
		p.Name = fmt.Sprintf("t%d", i)
		pods = append(pods, p)
	}
	policy, err := packing.NewPolicy("gpuadmit", pods, nodes)
	if err != nil {
		t.Fatal(err)
	}
	rec := recorder{Policy: policy, placed: map[string]Placement{}}
	run := packing.Simulate(packing.NewCluster(nodes), pods, rec, packing.Options{Seed: 1, Arrived: []float64{0.25, 0.5, 0.75, 1, 1.25}})
	if run.Failed == 0 || len(run.Points) < 4 {
		t.Fatalf("the case should overfill the cluster: %d failed, %d points", run.Failed, len(run.Points))
	}
	objs, claims := apiObjects(pods, rec.placed)
	placed, err := Placements(pods, objs, claims)
	if err != nil {
		t.Fatal(err)
	}
	got, bound, pending, err := Account(nodes, pods, placed, []float64{0.25, 0.5, 0.75, 1, 1.25})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(run.Points, got); diff != "" {
		t.Errorf("points (-simulator +replayed)\n%s", diff)
	}
	if pending != run.Failed || bound != len(pods)-run.Failed {
		t.Errorf("%d bound, %d pending; the simulator failed %d of %d", bound, pending, run.Failed, len(pods))
	}
}

// apiObjects writes placements as the API server holds them after
// scheduling: pods (with nodeName once bound) and claims (allocated to
// GPU devices of the node's pool, a share consuming its MiB).
func apiObjects(pods []packing.Pod, placed map[string]Placement) ([]corev1.Pod, []resourceapi.ResourceClaim) {
	var objs []corev1.Pod
	var claims []resourceapi.ResourceClaim
	for i, p := range pods {
		name := PodName(i, p)
		o := Pod(name, "s", p)
		pl, ok := placed[p.Name]
		if ok {
			o.Spec.NodeName = pl.Node
		}
		objs = append(objs, *o)
		c := Claim(name, p)
		if c == nil {
			continue
		}
		if ok {
			c.Status.Allocation = &resourceapi.AllocationResult{}
			for _, g := range pl.GPUs {
				r := resourceapi.DeviceRequestAllocationResult{Request: claimRequest, Driver: allocator.DRADriver, Pool: pl.Node, Device: fmt.Sprintf("gpu-%d", g)}
				if p.Shared() {
					r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{allocator.DRACapacityMemory: *resource.NewQuantity(p.GPUMilli<<20, resource.BinarySI)}
				}
				c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, r)
			}
		}
		claims = append(claims, *c)
	}
	return objs, claims
}

func TestAccountRefusesWhatPackingWouldNot(t *testing.T) {
	big := packing.Pod{Name: "big", MilliCPU: 1000, MemoryMiB: 512, GPUs: 1, GPUMilli: 600}
	tests := map[string]struct {
		pods   []packing.Pod
		placed []Placement
		want   string
	}{
		"two shares overcommit one GPU": {pods: []packing.Pod{big, big}, placed: []Placement{{Node: "n0", GPUs: []int{1}}, {Node: "n0", GPUs: []int{1}}}, want: "GPU 1 has not 600"},
		"one GPU twice for two":         {pods: []packing.Pod{two}, placed: []Placement{{Node: "n0", GPUs: []int{0, 0}}}, want: "GPU 0 has not 1000"},
		"an unknown node":               {pods: []packing.Pod{big}, placed: []Placement{{Node: "n9", GPUs: []int{0}}}, want: "unknown node n9"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, _, _, err := Account([]packing.Node{t4x2}, tc.pods, tc.placed, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestPlacementsRefuseAClaimThatDoesNotMatchThePod(t *testing.T) {
	objs, claims := apiObjects([]packing.Pod{share}, map[string]Placement{"share": {Node: "n0", GPUs: []int{1}}})
	claims[0].Status.Allocation.Devices.Results[0].ConsumedCapacity[allocator.DRACapacityMemory] = resource.MustParse("1000Mi")
	if _, err := Placements([]packing.Pod{share}, objs, claims); err == nil || !strings.Contains(err.Error(), "consumed 1000Mi") {
		t.Errorf("error %v, want the consumed capacity refused", err)
	}
}

func TestUntilArrivedStopsAtTheCrossingPod(t *testing.T) {
	pods := []packing.Pod{share, cpu, two, share, two}
	got := untilArrived(pods, 2000) // 460, 460, 2460: the third crosses
	if len(got) != 3 {
		t.Errorf("%d pods, want 3", len(got))
	}
}
