package placement

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

func TestNormalizeRanksDistinctScores(t *testing.T) {
	tests := map[string]struct {
		raw, want []int64
	}{
		"best first, ties share a rank":  {raw: []int64{-5, 7, 7, 3}, want: []int64{98, 100, 100, 99}},
		"unscored nodes get the minimum": {raw: []int64{unscored, -1}, want: []int64{0, 100}},
		"ranks past 100 stay at the minimum": {
			raw: func() []int64 {
				r := make([]int64, 103)
				for i := range r {
					r[i] = int64(i)
				}
				return r
			}(),
			want: func() []int64 {
				w := make([]int64, 103)
				for i := range w {
					w[i] = max(int64(i)-2, 0)
				}
				return w
			}()},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			scores := make(fwk.NodeScoreList, len(tc.raw))
			for i, r := range tc.raw {
				scores[i].Score = r
			}
			normalize(scores)
			got := make([]int64, len(scores))
			for i, s := range scores {
				got[i] = s.Score
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestShapeTakesWhatTheNodeSideConsumes(t *testing.T) {
	const gi = int64(1) << 30
	shared := shape{dra: true, capacity: 40 * gi, min: 2 * gi, step: gi, def: 40 * gi}
	tests := map[string]struct {
		s    shape
		it   item
		want int64
	}{
		"a share rounds up to a step":            {s: shared, it: item{memory: 5*gi + 1}, want: 6 * gi},
		"a share below the minimum takes it":     {s: shared, it: item{memory: gi}, want: 2 * gi},
		"a whole GPU takes the default":          {s: shared, it: item{whole: true}, want: 40 * gi},
		"a share without size takes the default": {s: shared, it: item{}, want: 40 * gi},
		"an unshared device is taken whole":      {s: shape{dra: true, capacity: 40 * gi}, it: item{memory: gi}, want: 40 * gi},
		"device-plugin shares are units":         {s: shape{capacity: 4}, it: item{shares: 3}, want: 3},
		"device-plugin shares on a DRA node":     {s: shared, it: item{shares: 3}, want: 0},
	}
	for name, tc := range tests {
		if got := tc.s.take(tc.it); got != tc.want {
			t.Errorf("%s: take = %d, want %d", name, got, tc.want)
		}
	}
}

func TestKindTaskOnEachShape(t *testing.T) {
	const gi = int64(1) << 30
	dra := shape{dra: true, capacity: 40 * gi, min: gi, step: gi, def: 40 * gi}
	dp := shape{capacity: 4}
	tests := map[string]struct {
		k    kind
		s    shape
		want allocator.FragTask
	}{
		"a DRA share is its milli-GPU of the device": {k: kind{dra: true, item: item{memory: 10 * gi}, gpus: 1}, s: dra,
			want: allocator.FragTask{GPUMilli: 250, GPUs: 1, Spec: allocator.NodeModeDRA, Weight: 1}},
		"device-plugin shares are milli-GPU of a GPU's shares": {k: kind{item: item{shares: 1}, gpus: 1}, s: dp,
			want: allocator.FragTask{GPUMilli: 250, GPUs: 1, Spec: allocator.NodeModeDevicePlugin, Weight: 1}},
		"a kind of the other mode keeps its own spec": {k: kind{item: item{shares: 1}, gpus: 1}, s: dra,
			want: allocator.FragTask{GPUMilli: 1000, GPUs: 1, Spec: allocator.NodeModeDevicePlugin, Weight: 1}},
		"more shares than a GPU has run nowhere": {k: kind{item: item{shares: 5}, gpus: 1}, s: dp,
			want: allocator.FragTask{GPUMilli: 1000, GPUs: 1, Spec: "none", Weight: 1}},
		"a kind without GPU keeps its CPU": {k: kind{milliCPU: 4000}, s: dp,
			want: allocator.FragTask{MilliCPU: 4000, Weight: 1}},
	}
	for name, tc := range tests {
		if diff := cmp.Diff(tc.want, tc.k.task(tc.s, 1)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

func sharesPod(units int64) *corev1.Pod {
	p := &corev1.Pod{}
	p.Spec.Containers = []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		"cpu": resource.MustParse("2"), allocator.ResourceShare: *resource.NewQuantity(units, resource.DecimalSI)}}}}
	return p
}

func cpuOnlyPod() *corev1.Pod {
	p := &corev1.Pod{}
	p.Spec.Containers = []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		"cpu": resource.MustParse("3"), "memory": resource.MustParse("2Gi")}}}}
	return p
}

func TestSignPod(t *testing.T) {
	claimed := sharesPod(1)
	claimed.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("c")}}
	tests := map[string]struct {
		fixed bool
		pod   *corev1.Pod
		want  []fwk.SignFragment
		code  fwk.Code
	}{
		"a pod without GPU under a derived workload is not signed": {pod: &corev1.Pod{}, code: fwk.Unschedulable},
		"a pod without GPU under a fixed workload signs its CPU and memory": {fixed: true, pod: cpuOnlyPod(), code: fwk.Success,
			want: []fwk.SignFragment{{Key: requestSigner, Value: signedRequest{MilliCPU: 3000, MemoryMiB: 2048}}}},
		"a share pod under a derived workload is not signed": {pod: sharesPod(1), code: fwk.Unschedulable},
		"a pod with a claim is not signed":                   {fixed: true, pod: claimed, code: fwk.Unschedulable},
		"a share pod under a fixed workload signs its request": {fixed: true, pod: sharesPod(2), code: fwk.Success,
			want: []fwk.SignFragment{{Key: requestSigner, Value: signedRequest{MilliCPU: 2000, Resource: allocator.ResourceShare, Shares: []int64{2}}}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, st := (&Plugin{fixedWorkload: tc.fixed}).SignPod(context.Background(), tc.pod)
			if st.Code() != tc.code {
				t.Fatalf("status %v, want %v", st, tc.code)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodeHint(t *testing.T) {
	withOffer := func(offer string) *corev1.Node {
		n := &corev1.Node{}
		n.Annotations = map[string]string{allocator.AnnotationShare: offer}
		return n
	}
	tests := map[string]struct {
		old, new any
		want     fwk.QueueingHint
	}{
		"a new node with a share offer": {new: withOffer(`{"sharesPerGPU":8}`), want: fwk.Queue},
		"a new node without one":        {new: &corev1.Node{}, want: fwk.QueueSkip},
		"the offer changed":             {old: withOffer(`{"sharesPerGPU":4}`), new: withOffer(`{"sharesPerGPU":8}`), want: fwk.Queue},
		"another annotation changed":    {old: withOffer(`{"sharesPerGPU":4}`), new: withOffer(`{"sharesPerGPU":4}`), want: fwk.QueueSkip},
	}
	for name, tc := range tests {
		got, err := isSchedulableAfterNodeChange(klog.Background(), &corev1.Pod{}, tc.old, tc.new)
		if err != nil || got != tc.want {
			t.Errorf("%s: %v, %v; want %v", name, got, err, tc.want)
		}
	}
}

func TestArgs(t *testing.T) {
	tests := map[string]struct {
		raw     string
		wantErr string
		want    int
	}{
		"no args":                      {raw: "", want: 0},
		"a workload":                   {raw: `{"workload":[{"gpuMemory":"10Gi","weight":2},{"cpu":"4","weight":1}]}`, want: 2},
		"two GPU forms":                {raw: `{"workload":[{"gpuMemory":"10Gi","shares":1,"weight":1}]}`, wantErr: "workload[0]: Invalid value"},
		"no weight":                    {raw: `{"workload":[{"gpus":1}]}`, wantErr: "workload[0].weight"},
		"models":                       {raw: `{"workload":[{"gpus":1,"models":["T4","V100"],"weight":1}]}`, want: 1},
		"models of a kind without GPU": {raw: `{"workload":[{"cpu":"4","models":["T4"],"weight":1}]}`, wantErr: "workload[0].models"},
		"an empty model":               {raw: `{"workload":[{"gpus":1,"models":["T4",""],"weight":1}]}`, wantErr: "workload[0].models[1]"},
	}
	for name, tc := range tests {
		var obj runtime.Object
		if tc.raw != "" {
			obj = &runtime.Unknown{Raw: []byte(tc.raw)}
		}
		a, err := decodeArgs(obj)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want one containing %q", name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || len(a.Workload) != tc.want {
			t.Errorf("%s: %d kinds, %v; want %d", name, len(a.Workload), err, tc.want)
		}
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || len(s) >= len(sub) && (s[:len(sub)] == sub || contains(s[1:], sub))
}

// twoKindWorkload is an empty derived workload, two kinds of GPU pod, and
// add, which counts n more pods of a kind.
func twoKindWorkload() (w *workload, small, large kind, add func(n int, k kind)) {
	w = newWorkload()
	add = func(n int, k kind) {
		for range n {
			w.set(types.UID(fmt.Sprint(len(w.pods))), counted{kind: k}, nil, true)
		}
	}
	return w, kind{milliCPU: 1000, gpus: 1}, kind{milliCPU: 8000, gpus: 1}, add
}

// TestDerivedWorkloadRevisesAfterRefreshShare: a new revision (and with
// it fresh placers, whose memo starts empty) once the pods counted since
// the last reach refreshShare of the pods counted and the mix moved by as
// much, not one pod before.
func TestDerivedWorkloadRevisesAfterRefreshShare(t *testing.T) {
	w, small, large, add := twoKindWorkload()
	add(100, small)
	rev, _ := w.snapshot()
	// k large pods move the mix by k/(100+k): the revision needs the
	// least k with k/(100+k) >= refreshShare.
	k := int(math.Ceil(refreshShare * 100 / (1 - refreshShare)))
	add(k-1, large)
	if r, kinds := w.snapshot(); r != rev || len(kinds) != 1 {
		t.Fatalf("%d of %d pods new: revision %d (was %d) with %d kinds; want the old one", k-1, 99+k, r, rev, len(kinds))
	}
	add(1, large)
	r, kinds := w.snapshot()
	if r == rev || len(kinds) != 2 || kinds[1].weight != float64(k) {
		t.Fatalf("%d of %d pods new: revision %d (was %d), kinds %+v; want a new one where large weighs %d", k, 100+k, r, rev, kinds, k)
	}
	if again, _ := w.snapshot(); again != r {
		t.Errorf("nothing new: revision %d, want %d kept", again, r)
	}
}

// Pods that keep coming in the revision's proportions do not revise the
// workload, however many: its distribution has not moved.
func TestDerivedWorkloadKeepsItsRevisionWhileTheMixHolds(t *testing.T) {
	w, small, large, add := twoKindWorkload()
	add(100, small)
	add(100, large)
	rev, _ := w.snapshot()
	for range 10 { // 200 more pods, half and half: 100% of the pods came, 0% moved
		add(10, small)
		add(10, large)
		if r, _ := w.snapshot(); r != rev {
			t.Fatalf("%d pods in the same mix: revision %d, want %d kept", len(w.pods), r, rev)
		}
	}
	add(60, large) // 460 pods, 260 large: the mix moved by about 6.5%
	if r, kinds := w.snapshot(); r == rev || kinds[0].kind != large {
		t.Errorf("the mix moved: revision %d (was %d), first kind %+v; want a new revision led by large", r, rev, kinds[0].kind)
	}
}

// The derived workload skips computing how far the mix moved while too few
// pods changed for it to reach refreshShare (stillWithin): over random
// arrivals, departures and changes of kind among 40 kinds, no snapshot that
// kept its revision had, by moved computed afresh, a mix moved by
// refreshShare while the other rules let it revise, and the skip did skip.
func TestDerivedWorkloadSkipsOnlyChecksThatCannotRevise(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		w := newWorkload()
		kinds := make([]counted, 40)
		for i := range kinds {
			kinds[i] = counted{kind: kind{milliCPU: int64(1000 * (i + 1)), gpus: 1}}
		}
		uid := 0
		var live []types.UID
		skew := 0 // the kinds new pods favour drift, so that the mix moves
		checks, revisions, skipped := 0, 0, 0
		for step := range 3000 {
			switch x := rng.IntN(10); {
			case x < 6 || len(live) < 20:
				uid++
				live = append(live, types.UID(fmt.Sprint(uid)))
				w.set(live[len(live)-1], kinds[(skew+rng.IntN(8))%len(kinds)], nil, true)
			case x < 9:
				i := rng.IntN(len(live))
				w.set(live[i], counted{}, nil, false)
				live = slices.Delete(live, i, i+1)
			default:
				w.set(live[rng.IntN(len(live))], kinds[rng.IntN(len(kinds))], nil, true)
			}
			if step%150 == 0 {
				skew++
			}
			w.mu.Lock()
			due := w.kinds != nil && float64(w.changes) >= max(1, refreshShare*float64(len(w.pods)))
			moved := w.moved()
			if due && w.changes < w.quiet {
				skipped++
			}
			w.mu.Unlock()
			was := w.rev
			rev, _, _ := w.snapshotPinned(0)
			switch {
			case rev != was:
				revisions++
				if was != 0 && moved < refreshShare {
					t.Fatalf("seed %d, step %d: revision %d with the mix moved by %.4f, less than refreshShare", seed, step, rev, moved)
				}
			case due:
				checks++
				if moved >= refreshShare {
					t.Fatalf("seed %d, step %d: the mix moved by %.4f since revision %d, %d changes, %d pods; want a new revision",
						seed, step, moved, rev, w.changes, len(w.pods))
				}
			}
		}
		if revisions < 5 || checks == 0 || skipped == 0 {
			t.Errorf("seed %d: %d revisions, %d kept snapshots due by count, %d of them not computed; want a drifting mix that revises, is checked and skips", seed, revisions, checks, skipped)
		}
	}
}

// holder is a claim tracker of claims by name and pending allocations by UID.
type holder struct {
	claims  map[string]*resourceapi.ResourceClaim
	pending map[types.UID]*resourceapi.AllocationResult
}

func (h holder) Get(_, name string) (*resourceapi.ResourceClaim, error) {
	if c, ok := h.claims[name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("claim %s not found", name)
}

func (h holder) GetPendingAllocation(uid types.UID) *resourceapi.AllocationResult {
	return h.pending[uid]
}

func TestHeldOnCountsEachClaimOfTheNodesPodsOnce(t *testing.T) {
	result := func(device string, share bool, mib int64) resourceapi.DeviceRequestAllocationResult {
		r := resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: allocator.DRADriver, Pool: "n", Device: device}
		if share {
			r.ShareID = ptr.To(types.UID(device + fmt.Sprint(mib)))
			r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{allocator.DRACapacityMemory: *resource.NewQuantity(mib<<20, resource.BinarySI)}
		}
		return r
	}
	claim := func(name string, results ...resourceapi.DeviceRequestAllocationResult) *resourceapi.ResourceClaim {
		c := &resourceapi.ResourceClaim{}
		c.Name, c.UID = name, types.UID(name)
		if len(results) > 0 {
			c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}}
		}
		return c
	}
	other := result("gpu-2", false, 0)
	other.Driver = "gpu.example.com"
	h := holder{claims: map[string]*resourceapi.ResourceClaim{
		"shared":   claim("shared", result("gpu-0", true, 300)),
		"whole":    claim("whole", result("gpu-1", false, 0)),
		"inflight": claim("inflight"),
		"foreign":  claim("foreign", other),
	}, pending: map[types.UID]*resourceapi.AllocationResult{"inflight": {Devices: resourceapi.DeviceAllocationResult{
		Results: []resourceapi.DeviceRequestAllocationResult{result("gpu-0", true, 200)}}}}}
	podWith := func(name string, claims ...string) *corev1.Pod {
		p := &corev1.Pod{}
		p.Name, p.UID = name, types.UID(name)
		for _, c := range claims {
			p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: c, ResourceClaimName: ptr.To(c)})
		}
		return p
	}
	n := framework.NewNodeInfo(podWith("a", "shared", "whole"), podWith("b", "shared", "inflight"), podWith("c", "foreign", "missing"))
	got := heldOn(n, h)
	s := shape{dra: true, capacity: 1000 << 20}
	want := map[string]int64{"gpu-0": 500 << 20, "gpu-1": 1000 << 20, "gpu-2": 0}
	for d, w := range want {
		if c := got.consumed("n", d, s); c != w {
			t.Errorf("%s: %d MiB held, want %d (the shared claim once, the one in flight, the whole device, no other driver's)", d, c>>20, w>>20)
		}
	}

	// A crowded node: more claims than claimsSeen holds in its array,
	// every pod sharing one claim, which still counts once.
	var crowd []*corev1.Pod
	for i := range 3 * len(claimsSeen{}.few) {
		name := fmt.Sprintf("own-%d", i)
		h.claims[name] = claim(name)
		crowd = append(crowd, podWith("p-"+name, "shared", name))
	}
	if c := heldOn(framework.NewNodeInfo(crowd...), h).consumed("n", "gpu-0", s); c != 300<<20 {
		t.Errorf("gpu-0 of a node of %d pods sharing one claim: %d MiB held, want 300", len(crowd), c>>20)
	}
}

// revisionNodes is 8 device-plugin nodes of 2 GPUs, node i running i share
// pods, a request of one share, and the scores of that request on them
// under revision rev of kinds, kept in s.
func revisionNodes(t *testing.T) (nodes []fwk.NodeInfo, under func(s *nodeStates, rev uint64, kinds []weighted) map[string]int64, underCPU func(s *nodeStates, rev uint64, kinds []weighted, cpus int64) map[string]int64) {
	offer := `{"resource":"gpuadmit.io/gpu-mem","unitMiB":10240,"sharesPerGPU":4}`
	gpus := `[{"index":0,"healthy":true,"migMode":"Disabled","memoryMiB":40960},{"index":1,"healthy":true,"migMode":"Disabled","memoryMiB":40960}]`
	share := func(name string, units int64) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				"cpu": resource.MustParse("1"), allocator.ResourceShare: *resource.NewQuantity(units, resource.DecimalSI)}}}}}}
	}
	for i := range 8 {
		model := []string{"A10", "T4"}[i%2] // for the prices (TestStaleScoresPayTheNewPrices)
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i), Annotations: map[string]string{
			allocator.AnnotationGPUs: strings.ReplaceAll(gpus, `"index"`, `"model":"`+model+`","index"`), allocator.AnnotationShare: offer}}}
		n.Status.Allocatable = corev1.ResourceList{"cpu": resource.MustParse("64"), "memory": resource.MustParse("256Gi")}
		var pods []*corev1.Pod
		for j := range i {
			pods = append(pods, share(fmt.Sprintf("n%d-%d", i, j), int64(1+j%3)))
		}
		info := framework.NewNodeInfo(pods...)
		info.SetNode(n)
		nodes = append(nodes, info)
	}
	pl := &Plugin{}
	sets := map[uint64]*placerSet{}
	underCPU = func(s *nodeStates, rev uint64, kinds []weighted, cpus int64) map[string]int64 {
		p := share("new", 1)
		p.Spec.Containers[0].Resources.Requests["cpu"] = *resource.NewQuantity(cpus, resource.DecimalSI)
		r, err := readRequest(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if sets[rev] == nil {
			sets[rev] = newPlacerSet(rev, kinds)
		}
		return scoresOf(s.score(pl, nodes, r, sets[rev]), nodes)
	}
	return nodes, func(s *nodeStates, rev uint64, kinds []weighted) map[string]int64 {
		return underCPU(s, rev, kinds, 1)
	}, underCPU
}

var (
	onesKinds   = []weighted{{kind: kind{milliCPU: 1000, item: item{shares: 1}, gpus: 1}, weight: 1}}
	threesKinds = []weighted{{kind: kind{milliCPU: 1000, item: item{shares: 3}, gpus: 1}, weight: 1}}
)

// TestKeptScoresEndWithTheWorkloadRevision: nodeStates keeps each node's
// scores from cycle to cycle, but a score is the placement cost under one
// revision of the target workload; under the next, the same unchanged
// nodes score as a plugin that never saw them scores them, from the cycle
// after the one that publishes it (which made the revision, and keeps
// its stale scores as they are).
func TestKeptScoresEndWithTheWorkloadRevision(t *testing.T) {
	_, under, _ := revisionNodes(t)
	var kept nodeStates
	first := under(&kept, 1, onesKinds)
	if publishing := under(&kept, 2, threesKinds); !cmp.Equal(first, publishing) {
		t.Errorf("the cycle that publishes revision 2 refreshed scores (-kept +got):\n%s", cmp.Diff(first, publishing))
	}
	second := under(&kept, 2, threesKinds)
	var fresh nodeStates
	if want := under(&fresh, 2, threesKinds); !cmp.Equal(want, second) {
		t.Errorf("scores under revision 2 (-fresh +kept from revision 1):\n%s", cmp.Diff(want, second))
	}
	if cmp.Equal(first, second) {
		t.Errorf("scores %v the same under both workloads: the test proves nothing", first)
	}
}

// A node forgotten (not scored for forgetAfter cycles) gives its slot of
// the kept scores to the next new node, which scores as itself, not with
// the scores kept for the node before it; and a version count about to
// wrap ends every kept score rather than let an old one pass for new.
func TestKeptScoresBelongToTheirNode(t *testing.T) {
	nodes, under, _ := revisionNodes(t)
	var fresh nodeStates
	want := under(&fresh, 1, onesKinds)
	if want["n0"] == want["n3"] {
		t.Fatalf("n0 and n3 both score %d: the test proves nothing", want["n0"])
	}
	var s nodeStates
	under(&s, 1, onesKinds)
	n0 := nodes[0]
	for range 2 * forgetAfter { // n0 is not scored: forgotten at the next sweep (every forgetAfter cycles)
		s.score(&Plugin{}, nodes[1:], mustRequest(t), newPlacerSet(1, onesKinds))
	}
	if s.m["n0"] != nil || len(s.free) != 1 {
		t.Fatalf("after %d cycles without n0: kept %v, %d free slots; want it forgotten", 2*forgetAfter, s.m["n0"] != nil, len(s.free))
	}
	// n0 comes back as a copy of n3, in n0's old slot.
	twin := framework.NewNodeInfo()
	for _, p := range nodes[3].GetPods() {
		twin.AddPod(p.GetPod())
	}
	twin.SetNode(n0.Node())
	nodes[0] = twin
	got := under(&s, 1, onesKinds)
	if got["n0"] != want["n3"] {
		t.Errorf("n0 back with n3's pods in a reused slot scores %d, want %d (n3's); %d is the old n0's", got["n0"], want["n3"], want["n0"])
	}
	nodes[0] = n0

	var wrap nodeStates
	under(&wrap, 1, onesKinds) // the request numbered, the entries at versions 1 to 8
	wrap.ver = math.MaxUint32 - 3
	wrap.slices.Add(1) // every node's entry is reset: eight versions, past the last
	under(&wrap, 1, onesKinds)
	if wrap.ver != uint32(len(nodes)) {
		t.Errorf("versions at %d after a cycle that would wrap them; want them started over before it, at %d", wrap.ver, len(nodes))
	}
	if again := under(&wrap, 1, onesKinds); !cmp.Equal(want, again) {
		t.Errorf("scores across the version wrap (-fresh +kept):\n%s", cmp.Diff(want, again))
	}
	if wrap.computed != 0 {
		t.Errorf("second cycle after the wrap computed %d scores, want all kept", wrap.computed)
	}
}

// schedulerCache is the scheduler's own cache holding nodes and their
// pods, and infos, its snapshot's NodeInfos updated (UpdateSnapshot), as
// before each scheduling cycle.
func schedulerCache(t *testing.T, nodes []fwk.NodeInfo) (sc internalcache.Cache, infos func() []fwk.NodeInfo) {
	logger := klog.Background()
	sc = internalcache.New(context.Background(), nil, false, false)
	for _, n := range nodes {
		sc.AddNode(logger, n.Node())
		for _, p := range n.GetPods() {
			pod := p.GetPod().DeepCopy()
			pod.Spec.NodeName = n.Node().Name
			if err := sc.AddPod(logger, pod); err != nil {
				t.Fatal(err)
			}
		}
	}
	snap := internalcache.NewEmptySnapshot()
	return sc, func() []fwk.NodeInfo {
		t.Helper()
		if err := sc.UpdateSnapshot(logger, snap); err != nil {
			t.Fatal(err)
		}
		infos, err := snap.NodeInfos().List()
		if err != nil {
			t.Fatal(err)
		}
		return infos
	}
}

// scoresOf is the scores cycle c gave nodes, by node name.
func scoresOf(c *cycle, nodes []fwk.NodeInfo) map[string]int64 {
	out := map[string]int64{}
	for _, n := range nodes {
		if v, ok := c.lookup(n); ok {
			out[n.Node().Name] = v
		}
	}
	return out
}

// Through the scheduler's own cache and snapshot (UpdateSnapshot between
// cycles), a cycle computes afresh only the node a pod came to.
func TestKeptScoresThroughTheSchedulersSnapshot(t *testing.T) {
	nodes, _, _ := revisionNodes(t)
	sc, infos := schedulerCache(t, nodes)
	logger := klog.Background()
	var s nodeStates
	set := newPlacerSet(1, onesKinds)
	cycle := func() { s.score(&Plugin{}, infos(), mustRequest(t), set) }
	cycle()
	if s.computed == 0 {
		t.Fatal("the first cycle computed nothing")
	}
	cycle()
	if s.computed != 0 {
		t.Errorf("nothing changed: %d scores computed, want 0", s.computed)
	}
	pod := nodes[1].GetPods()[0].GetPod().DeepCopy()
	pod.Name, pod.UID, pod.Spec.NodeName = "came", "came", "n1"
	if err := sc.AddPod(logger, pod); err != nil {
		t.Fatal(err)
	}
	cycle()
	if s.computed != 1 || len(s.m) != len(nodes) {
		t.Errorf("a pod came to n1: %d scores computed, %d entries; want 1 and %d", s.computed, len(s.m), len(nodes))
	}
}

// A cycle finds a node's entry by the Node object its NodeInfo holds,
// through the scheduler's own cache and snapshot: copies of the NodeInfos
// (as pod-group preemption makes) hold the same objects and find the
// entries kept; a node whose object the informer replaces keeps its one
// entry (by name), which the change resets, and its score; byNode holds
// one object a node, and none of a node forgotten.
func TestEntriesFollowTheNodeObject(t *testing.T) {
	nodes, _, _ := revisionNodes(t)
	sc, infos := schedulerCache(t, nodes)
	logger := klog.Background()
	var s nodeStates
	set := newPlacerSet(1, onesKinds)
	cycle := func(infos []fwk.NodeInfo) map[string]int64 {
		return scoresOf(s.score(&Plugin{}, infos, mustRequest(t), set), infos)
	}
	want := cycle(infos())
	if len(want) != len(nodes) || len(s.byNode) != len(nodes) {
		t.Fatalf("first cycle: %d nodes scored, %d kept by object; want %d", len(want), len(s.byNode), len(nodes))
	}
	for name, v := range want {
		if name != "n1" && v == want["n1"] {
			t.Fatalf("n1 and %s both score %d: a node found in another's entry would pass unseen", name, v)
		}
	}
	var copies []fwk.NodeInfo
	for _, n := range infos() {
		copies = append(copies, n.Snapshot())
	}
	if got := cycle(copies); s.computed != 0 || len(s.byNode) != len(nodes) || !cmp.Equal(want, got) {
		t.Errorf("copies of the NodeInfos: %d computed, %d kept by object, scores %v; want 0, %d, %v", s.computed, len(s.byNode), got, len(nodes), want)
	}
	old := nodes[1].Node()
	for i := range 200 {
		n := old.DeepCopy()
		n.Labels = map[string]string{"turn": fmt.Sprint(i)}
		sc.UpdateNode(logger, old, n)
		old = n
		got := cycle(infos())
		if s.computed != 1 || len(s.m) != len(nodes) || !cmp.Equal(want, got) {
			t.Fatalf("n1's object replaced (%d): %d computed, %d entries, scores %v; want 1, %d, %v", i, s.computed, len(s.m), got, len(nodes), want)
		}
	}
	if len(s.byNode) != len(nodes) {
		t.Errorf("after 200 objects of n1: %d kept by object, want %d", len(s.byNode), len(nodes))
	}
	n0 := nodes[0].Node()
	var rest []fwk.NodeInfo
	for _, n := range infos() {
		if n.Node().Name != "n0" {
			rest = append(rest, n)
		}
	}
	for range 2 * forgetAfter {
		cycle(rest)
	}
	if _, kept := s.byNode[n0]; kept || s.m["n0"] != nil || len(s.byNode) != len(rest) {
		t.Errorf("n0 forgotten: its object kept by byNode %v, its entry %v, %d kept by object; want neither, %d", kept, s.m["n0"] != nil, len(s.byNode), len(rest))
	}
}

// mustRequest is revisionNodes' request: one share, one CPU.
func mustRequest(t *testing.T) request {
	t.Helper()
	r, err := readRequest(&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{"cpu": resource.MustParse("1"), allocator.ResourceShare: *resource.NewQuantity(1, resource.DecimalSI)}}}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRevisionRefreshesAFewScoresACycle: after a revision, a cycle
// computes afresh at most refreshAtMost of the stale scores it meets and
// uses the others as kept, until all are fresh, from the cycle after the
// one that publishes it (which made the revision); a request new to the
// nodes is scored under the new revision everywhere.
func TestRevisionRefreshesAFewScoresACycle(t *testing.T) {
	nodes, _, under := revisionNodes(t)
	var fresh1, fresh2 nodeStates
	old, revised := under(&fresh1, 1, onesKinds, 1), under(&fresh2, 2, threesKinds, 1)
	kept := nodeStates{refreshAtMost: 3}
	under(&kept, 1, onesKinds, 1)
	telling := 0 // nodes whose two scores differ
	for cycle, wantFresh := range []int{0, 3, 6, 8, 8} {
		got := under(&kept, 2, threesKinds, 1)
		fresh := 0
		for _, n := range nodes {
			name := n.Node().Name
			want := old[name]
			if k, ok := kept.find(kept.m[name].slot, 0); ok && k.rev == 2 {
				fresh, want = fresh+1, revised[name]
			}
			if got[name] != want {
				t.Errorf("cycle %d after the revision: %s scores %d, want %d, its kept score's", cycle, name, got[name], want)
			}
			if cycle == 0 && old[name] != revised[name] {
				telling++
			}
		}
		if fresh != wantFresh {
			t.Errorf("cycle %d after the revision: %d scores of revision 2, want %d", cycle, fresh, wantFresh)
		}
	}
	if telling < 4 {
		t.Errorf("%d nodes score differently under the two workloads: the test proves little", telling)
	}
	// The publishing cycle and the three that refresh: every score is
	// fresh before the workload may be revised again.
	if got := kept.refreshCycles(len(nodes)); got != 4 {
		t.Errorf("revisions at least %d cycles apart, want 4: the cycles that refresh all 8 nodes, 3 a cycle, after the one that publishes", got)
	}
	kept = nodeStates{refreshAtMost: 3}
	under(&kept, 1, onesKinds, 1)
	if got, want := under(&kept, 2, threesKinds, 5), under(&fresh2, 2, threesKinds, 5); !cmp.Equal(got, want) {
		t.Errorf("a request new to the nodes after the revision (-revision 2's +kept):\n%s", cmp.Diff(want, got))
	}
}

// pricedNodes is revisionNodes' nodes (A10 and T4 by turns), and the
// scores a cycle of nodeStates s under set gives them for a request of one
// share, by node: what the tests of prices compare.
func pricedNodes(t *testing.T) ([]fwk.NodeInfo, func(s *nodeStates, set *placerSet) map[string]int64) {
	nodes, _, _ := revisionNodes(t)
	r, err := readRequest(&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{"cpu": resource.MustParse("1"), allocator.ResourceShare: resource.MustParse("1")}}}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pl := &Plugin{}
	return nodes, func(s *nodeStates, set *placerSet) map[string]int64 {
		return scoresOf(s.score(pl, nodes, r, set), nodes)
	}
}

// priced is a placer set of revision rev over kinds, at prices.
func priced(rev uint64, kinds []weighted, prices map[string]float64) *placerSet {
	set := newPlacerSet(rev, kinds)
	set.prices = prices
	return set
}

// lowPrices and highPrices are the prices of pricedNodes' models before
// and after: T4 dearer, A10 cheaper.
var lowPrices, highPrices = map[string]float64{"A10": 0.1, "T4": 0.1}, map[string]float64{"A10": 0.05, "T4": 0.9}

// TestStaleScoresPayTheNewPrices: a score kept from an earlier workload
// revision is stale in its fragmentation only; every node, refreshed or
// not, pays the scarcity prices of the cycle's placer set. Before, a node
// not yet refreshed kept the prices it was scored under, and a model
// whose price had risen still looked cheap beside nodes refreshed.
func TestStaleScoresPayTheNewPrices(t *testing.T) {
	nodes, scores := pricedNodes(t)
	var f1, f2, f3 nodeStates
	before := scores(&f1, priced(1, onesKinds, lowPrices))
	stale := scores(&f2, priced(1, onesKinds, highPrices)) // revision 1's fragmentation, revision 2's prices
	revised := scores(&f3, priced(2, threesKinds, highPrices))
	kept := nodeStates{refreshAtMost: 3}
	scores(&kept, priced(1, onesKinds, lowPrices))
	set := priced(2, threesKinds, highPrices)
	// The cycle that publishes the revision refreshes none (it made the
	// revision), the next 3: of the 8 nodes, 3 are full.
	for cycle, wantFresh := range []int{0, 3} {
		got := scores(&kept, set)
		var fresh, moved int
		for _, n := range nodes {
			name := n.Node().Name
			want := stale[name]
			if k, ok := kept.find(kept.m[name].slot, 0); ok && k.rev == 2 {
				fresh, want = fresh+1, revised[name]
			} else if stale[name] != before[name] {
				moved++
			}
			if got[name] != want {
				t.Errorf("cycle %d after the revision: %s scores %d, want %d", cycle, name, got[name], want)
			}
		}
		if fresh != wantFresh || moved < 2 {
			t.Errorf("cycle %d after the revision: %d nodes refreshed (want %d), %d stale ones whose price moved: the test proves little", cycle, fresh, wantFresh, moved)
		}
	}
}

// TestNewPricesKeepTheScores: new scarcity prices under the same workload
// (the supply changed) reprice the placer set: its revision and scorers
// stay, a cycle computes no score afresh, and every node pays the new
// prices, as a plugin that never saw the nodes scores them.
func TestNewPricesKeepTheScores(t *testing.T) {
	_, scores := pricedNodes(t)
	set := priced(1, onesKinds, lowPrices)
	var kept nodeStates
	before := scores(&kept, set)
	again := set.repriced(highPrices)
	sc := set.get()
	set.put(sc)
	shared := again.get()
	again.put(shared)
	if again.rev != set.rev || shared != sc {
		t.Fatalf("the repriced set: revision %d (want %d), shares scorers with the set it reprices: %v", again.rev, set.rev, shared == sc)
	}
	got := scores(&kept, again)
	if kept.computed != 0 {
		t.Errorf("the cycle under new prices computed %d scores afresh, want 0", kept.computed)
	}
	var never nodeStates
	if want := scores(&never, priced(1, onesKinds, highPrices)); !cmp.Equal(got, want) {
		t.Errorf("scores under the new prices (-a plugin that never saw the nodes +kept):\n%s", cmp.Diff(want, got))
	}
	if cmp.Equal(got, before) {
		t.Error("the new prices changed no score: the test proves little")
	}
}

// TestSupplyChangeReprices: a change of supply that moves the prices
// under the same workload revision reprices the set (same revision);
// a new revision makes a new set.
func TestSupplyChangeReprices(t *testing.T) {
	pl := &Plugin{}
	pl.supply.built, pl.supply.at = true, pl.supplyVersion()
	pl.supply.gpus = map[string]int{"T4": 8, "A10": 8}
	pl.supply.shapes = map[string]modelInfo{"T4": {dp: shape{capacity: 4}, hasDP: true}, "A10": {dp: shape{capacity: 4}, hasDP: true}}
	pl.supply.of = []nodeModel{{node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "t"}}, model: "T4"}, {node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, model: "A10"}}
	pl.supply.accepted, pl.supply.sized = map[string]map[string]bool{}, map[acceptsKey]acceptsOut{}
	pinned := []pinnedKind{{counted: counted{kind: kind{item: item{shares: 4}, gpus: 1}, pin: pin{models: "T4"}}, weight: 1},
		{counted: counted{kind: kind{item: item{shares: 1}, gpus: 1}}, weight: 3}}
	var c placerCache
	first := c.get(pl, 1, onesKinds, pinned)
	if first.prices["T4"] == 0 {
		t.Fatalf("prices %v: want T4 priced, the test proves little", first.prices)
	}
	pl.supply.changes.Add(1) // a Node changed; with no lister the supply is now empty, and nothing is priced
	second := c.get(pl, 1, onesKinds, pinned)
	if second == first || second.rev != first.rev || second.prices != nil {
		t.Errorf("after a supply change: set %p rev %d prices %v, want a new set of revision %d with no prices", second, second.rev, second.prices, first.rev)
	}
	if third := c.get(pl, 2, threesKinds, pinned); third.rev == first.rev {
		t.Errorf("a new workload revision kept the set's revision %d", third.rev)
	}
}

// TestNodesAlikeShareOneComputation: of 40 nodes in 4 states (the same
// pods on the same node type, 10 of each), a cycle computes 4 scores, and
// each node's score is the one computed for it alone.
func TestNodesAlikeShareOneComputation(t *testing.T) {
	offer := `{"resource":"gpuadmit.io/gpu-mem","unitMiB":10240,"sharesPerGPU":4}`
	gpus := `[{"index":0,"healthy":true,"migMode":"Disabled","memoryMiB":40960},{"index":1,"healthy":true,"migMode":"Disabled","memoryMiB":40960}]`
	share := func(name string, units, cpus int64) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				"cpu": *resource.NewQuantity(cpus, resource.DecimalSI), allocator.ResourceShare: *resource.NewQuantity(units, resource.DecimalSI)}}}}}}
	}
	var nodes []fwk.NodeInfo
	for i := range 40 {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i), Annotations: map[string]string{
			allocator.AnnotationGPUs: gpus, allocator.AnnotationShare: offer}}}
		n.Status.Allocatable = corev1.ResourceList{"cpu": resource.MustParse("64"), "memory": resource.MustParse("256Gi")}
		var pods []*corev1.Pod
		switch i % 4 { // states 1 and 2 differ only in CPU, 2 and 3 only in which GPU holds what
		case 1:
			pods = append(pods, share(fmt.Sprintf("p%d", i), 3, 1))
		case 2:
			pods = append(pods, share(fmt.Sprintf("p%d", i), 3, 8))
		case 3:
			pods = append(pods, share(fmt.Sprintf("p%d", i), 4, 1), share(fmt.Sprintf("q%d", i), 3, 7))
		}
		info := framework.NewNodeInfo(pods...)
		info.SetNode(n)
		nodes = append(nodes, info)
	}
	r, err := readRequest(share("new", 1, 2), nil)
	if err != nil {
		t.Fatal(err)
	}
	set := newPlacerSet(1, []weighted{{kind: kind{milliCPU: 4000, item: item{shares: 2}, gpus: 1}, weight: 1}, {kind: kind{milliCPU: 32000}, weight: 1}})
	pl := &Plugin{}
	var s nodeStates
	c := s.score(pl, nodes, r, set)
	if s.computed != 4 {
		t.Errorf("computed %d scores for 40 nodes in 4 states, want 4", s.computed)
	}
	distinct := map[int64]bool{}
	for _, n := range nodes {
		got, _ := c.lookup(n)
		st := &nodeState{}
		want, _ := pl.unpricedScore(newPlacerSet(1, set.kinds).get(), n, r, pl.view(n, r, st)) // the set prices nothing
		if got != want {
			t.Errorf("%s: score %d, want %d, its own", n.Node().Name, got, want)
		}
		distinct[got] = true
	}
	if len(distinct) < 3 {
		t.Errorf("%d distinct scores among the 4 states: the test proves little", len(distinct))
	}
}

// TestDerivedWorkloadCountsPlacedDRAPods: a DRA pod stays in the derived
// workload once placed (its claim allocated and reserved for it), as a
// device-plugin pod does; a pod sharing a claim placed for another pod
// adds nothing. Before, a placed pod's request read as no GPU and left the
// workload, which then followed the pending pods alone and was revised
// after every few bindings.
func TestDerivedWorkloadCountsPlacedDRAPods(t *testing.T) {
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c", UID: "c"}}
	claim.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: allocator.DRAClassShare, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
		Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
			allocator.DRACapacityMemory: resource.MustParse("5Gi")}}}}}
	h := holder{claims: map[string]*resourceapi.ResourceClaim{"c": claim}}
	w := newWorkload()
	handler := w.podHandler("gpuadmit-scheduler", h)
	podUsing := func(name string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name)}}
		p.Spec.SchedulerName = "gpuadmit-scheduler"
		p.Spec.Containers = []corev1.Container{{Name: "c"}}
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("c")}}
		return p
	}
	want := kind{dra: true, item: item{memory: 5 << 30}, gpus: 1}
	first := podUsing("first")
	handler.OnAdd(first, false)
	if got := w.pods[first.UID].kind; got != want {
		t.Fatalf("pending pod counts as %+v, want %+v", got, want)
	}
	placed := claim.DeepCopy()
	placed.Status.Allocation = &resourceapi.AllocationResult{}
	placed.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "first", UID: first.UID}}
	h.claims["c"] = placed
	bound := first.DeepCopy()
	bound.Spec.NodeName = "n"
	handler.OnUpdate(first, bound)
	if got, ok := w.pods[first.UID]; !ok || got.kind != want || w.changes != 1 {
		t.Errorf("placed pod counts as %+v (%v), %d changes; want %+v, the one change of its adding", got, ok, w.changes, want)
	}
	second := podUsing("second")
	handler.OnAdd(second, false)
	if got, ok := w.pods[second.UID]; ok {
		t.Errorf("a pod sharing the claim placed for another counts as %+v; want it not counted", got)
	}
}

// A revision due waits until spacing cycles (snapshots) were taken since
// the last one, and then comes with every pod counted meanwhile.
func TestDerivedWorkloadRevisesAtMostOnceInSpacingCycles(t *testing.T) {
	w, small, large, add := twoKindWorkload()
	add(10, small)
	rev, _, _ := w.snapshotPinned(3)
	add(1, large) // due by refreshShare's rule: 1 of 11 pods, the mix moved by 9%
	for cycle := 1; cycle < 3; cycle++ {
		if r, kinds, _ := w.snapshotPinned(3); r != rev || len(kinds) != 1 {
			t.Fatalf("cycle %d since the revision: revision %d with %d kinds, want %d kept", cycle, r, len(kinds), rev)
		}
		add(1, large)
	}
	r, kinds, _ := w.snapshotPinned(3)
	if r == rev || len(kinds) != 2 || kinds[1].weight != 3 && kinds[0].weight != 3 {
		t.Fatalf("cycle 3 since the revision: revision %d (was %d), kinds %+v; want a new one with 3 large", r, rev, kinds)
	}
	if again, _, _ := w.snapshotPinned(3); again != r {
		t.Errorf("the next cycle: revision %d, want %d kept (nothing changed)", again, r)
	}
	add(5, large)
	if again, _, _ := w.snapshotPinned(3); again != r {
		t.Errorf("one cycle after a revision: revision %d, want %d kept until 3 cycles passed", again, r)
	}
}

// refreshCycles: the cycles to refresh every node at refreshAtMost a
// cycle, after the cycle that publishes the revision.
func TestRefreshCycles(t *testing.T) {
	for _, c := range []struct{ at, nodes, want int }{{0, 1213, 11}, {0, 128, 2}, {0, 129, 3}, {3, 10, 5}, {3, 0, 1}} {
		s := nodeStates{refreshAtMost: c.at}
		if got := s.refreshCycles(c.nodes); got != c.want {
			t.Errorf("refreshAtMost %d, %d nodes: %d cycles, want %d", c.at, c.nodes, got, c.want)
		}
	}
}

// refreshCycles counts the nodes whose scores the plugin keeps, when they
// are more than the cycle's feasible nodes: a revision stales them all.
func TestRefreshCyclesCountsTheNodesKept(t *testing.T) {
	s := nodeStates{refreshAtMost: 10, m: map[string]*nodeState{}}
	for i := range 95 {
		s.m[fmt.Sprint(i)] = &nodeState{}
	}
	if got := s.refreshCycles(3); got != 11 { // 10 to refresh, after the one that publishes
		t.Errorf("3 feasible nodes, 95 kept: %d cycles, want 11", got)
	}
	if got := s.refreshCycles(101); got != 12 {
		t.Errorf("101 feasible nodes, 95 kept: %d cycles, want 12", got)
	}
}

// spellChoices keys requests: lists that differ in any field of any
// alternative, or in order, spell differently; equal lists alike.
func TestSpellChoicesTellsListsApart(t *testing.T) {
	a100 := alternative{model: "A100-40GB", items: []item{{memory: 10 << 30}}}
	h100 := alternative{model: "H100-80GB", items: []item{{memory: 10 << 30}}}
	lists := [][]choice{
		{{a100, h100}},
		{{h100, a100}},
		{{a100}, {h100}},
		{{a100, {model: "H100-80GB", items: []item{{memory: 20 << 30}}}}},
		{{a100, {model: "H100-80GB", items: []item{{whole: true}}}}},
		{{a100, {model: "H100-80GB", items: []item{{whole: true}, {whole: true}}}}},
		{{a100, {model: "H100-80GB", migClass: "mig-1g.10gb.gpuadmit.io", migs: 1}}},
		{{a100, {model: "H100-80GB", migClass: "mig-1g.10gb.gpuadmit.io", migs: 2}}},
		{{a100, {model: "H100-80", migClass: "GB", migs: 2}}},
		{{{items: []item{{shares: 3}}}}},
	}
	seen := map[string]int{}
	for i, l := range lists {
		k := spellChoices(l)
		if j, ok := seen[k]; ok {
			t.Errorf("lists %d and %d spell alike: %q", j, i, k)
		}
		seen[k] = i
		copied := make([]choice, len(l))
		for c := range l {
			copied[c] = append(choice(nil), l[c]...)
		}
		if again := spellChoices(copied); again != k {
			t.Errorf("list %d and its copy spell %q and %q", i, k, again)
		}
	}
}

// A cycle finds most nodes' slots by walking the last cycle's list
// (nodeStates.prev) rather than byNode. Whatever the order and the subset
// of nodes from one cycle to the next (rotated, reversed, every other one
// infeasible, a node's object replaced), every node is found in its own
// entry: prev pairs each object with its node's slot, a cycle that changes
// nothing computes nothing, and the scores are those a fresh cache computes.
func TestCycleFindsSlotsInAnyOrder(t *testing.T) {
	nodes, _, _ := revisionNodes(t)
	set := newPlacerSet(1, onesKinds)
	var s nodeStates
	cycle := func(infos []fwk.NodeInfo) (map[string]int64, map[string]int64) {
		var fresh nodeStates
		return scoresOf(s.score(&Plugin{}, infos, mustRequest(t), set), infos),
			scoresOf(fresh.score(&Plugin{}, infos, mustRequest(t), set), infos)
	}
	rotated := func(k int) []fwk.NodeInfo { return append(slices.Clone(nodes[k:]), nodes[:k]...) }
	reversed := slices.Clone(nodes)
	slices.Reverse(reversed)
	var odd []fwk.NodeInfo
	for i, n := range nodes {
		if i%2 == 1 {
			odd = append(odd, n)
		}
	}
	replaced := slices.Clone(nodes)
	info := nodes[3].Snapshot()
	n := info.Node().DeepCopy()
	n.Labels = map[string]string{"new": "object"}
	info.SetNode(n)
	replaced[3] = info
	orders := [][]fwk.NodeInfo{nodes, nodes, rotated(3), rotated(5), reversed, odd, nodes, odd, rotated(1), replaced, nodes}
	for i, infos := range orders {
		got, want := cycle(infos)
		if !cmp.Equal(got, want) {
			t.Errorf("order %d: scores %v, a fresh cache's %v", i, got, want)
		}
		// 9 replaces n3's object (a new generation), 10 puts the old one
		// back: each a new version of n3's entry, one score computed.
		if wantComputed := map[bool]int{true: 1}[i >= 9]; i > 0 && s.computed != wantComputed {
			t.Errorf("order %d: %d scores computed, want %d", i, s.computed, wantComputed)
		}
		if len(s.prev) != len(infos) {
			t.Fatalf("order %d: prev holds %d nodes, want %d", i, len(s.prev), len(infos))
		}
		for j, p := range s.prev {
			if p.node != infos[j].Node() || s.m[p.node.Name] == nil || s.m[p.node.Name].slot != p.slot {
				t.Errorf("order %d: prev[%d] is %s in slot %d, not its node's entry", i, j, p.node.Name, p.slot)
			}
		}
	}
}

// The walk through the last cycle's list follows a rotated list (the
// scheduler starts each cycle where the last stopped when it checks only
// some of the nodes): the first node is looked up in byNode, and the walk
// moves on to where it was, so that every node after it is found in prev.
func TestCycleFollowsARotatedList(t *testing.T) {
	base, _, _ := revisionNodes(t)
	var nodes []fwk.NodeInfo
	for i := range 3 * lookAhead {
		info := base[i%len(base)].Snapshot()
		n := info.Node().DeepCopy()
		n.Name = fmt.Sprintf("m%d", i)
		info.SetNode(n)
		nodes = append(nodes, info)
	}
	set := newPlacerSet(1, onesKinds)
	var s nodeStates
	s.score(&Plugin{}, nodes, mustRequest(t), set)
	if s.looked != len(nodes) {
		t.Fatalf("first cycle: %d nodes looked up, want all %d", s.looked, len(nodes))
	}
	half := len(nodes) / 2
	s.score(&Plugin{}, append(slices.Clone(nodes[half:]), nodes[:half]...), mustRequest(t), set)
	if s.looked != 1 || s.computed != 0 {
		t.Errorf("list rotated by %d: %d nodes looked up in byNode, %d scores computed; want 1, 0", half, s.looked, s.computed)
	}
}

// moved, summed over the kinds' numbers (ids, now, then), is the total
// variation distance between the pods counted now and at the revision,
// computed here from the counts by kind: through random arrivals,
// departures and changes of kind, kinds that vanish and kinds new since
// the revision, and revisions that number the kinds afresh.
func TestMovedIsTheDistanceFromTheRevision(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	w := newWorkload()
	kindOf := func(i int) counted { return counted{kind: kind{milliCPU: int64(100 * (i + 1)), gpus: 1}} }
	var then map[counted]int
	var thenPods int
	var live []types.UID
	revisions := 0
	for step := range 4000 {
		switch x := rng.IntN(10); {
		case x < 6 || len(live) < 10:
			live = append(live, types.UID(fmt.Sprint(step)))
			w.set(live[len(live)-1], kindOf((step/500+rng.IntN(6))%30), nil, true) // the kinds drift
		case x < 9:
			i := rng.IntN(len(live))
			w.set(live[i], counted{}, nil, false)
			live = slices.Delete(live, i, i+1)
		default:
			w.set(live[rng.IntN(len(live))], kindOf(rng.IntN(30)), nil, true)
		}
		if was := w.rev; func() uint64 { r, _, _ := w.snapshotPinned(0); return r }() != was {
			revisions++
			then, thenPods = maps.Clone(w.count), len(w.pods)
		}
		w.mu.Lock()
		got := w.moved()
		n, r := len(w.pods), thenPods
		var d int
		for k := range w.count {
			d += max(w.count[k]*r-then[k]*n, then[k]*n-w.count[k]*r)
		}
		for k, c := range then {
			if _, ok := w.count[k]; !ok {
				d += c * n
			}
		}
		want := float64(d) / float64(2*n*r)
		if n == 0 || r == 0 {
			want = 1
		}
		w.mu.Unlock()
		if got != want {
			t.Fatalf("step %d: moved %v, the distance from the revision's counts %v", step, got, want)
		}
	}
	if revisions < 5 {
		t.Errorf("%d revisions over the run; want several, so that kinds are numbered afresh", revisions)
	}
}

// BenchmarkMoved457Kinds is stillWithin's check of how far the mix moved,
// over as many kinds as the gpuspec33 list asks (457) and the pods of the
// 1,213-node replay: the check a cycle makes once enough pods changed.
func BenchmarkMoved457Kinds(b *testing.B) {
	w := newWorkload()
	for i := range 8000 {
		w.set(types.UID(fmt.Sprint(i)), counted{kind: kind{milliCPU: int64(100 * (1 + i%457)), gpus: 1}, pin: pin{models: fmt.Sprint("m", i%7)}}, nil, true)
	}
	w.snapshotPinned(0)
	for i := range 300 { // the mix moves a little since the revision
		w.set(types.UID(fmt.Sprint(i)), counted{kind: kind{milliCPU: int64(100 * (1 + (i+1)%457)), gpus: 1}}, nil, true)
	}
	var d float64
	for b.Loop() {
		d += w.moved()
	}
	if d == 0 {
		b.Fatal("the mix did not move")
	}
}

// Kinds that come and go between revisions do not grow the numbering: a
// steady mix holds its revision while 20,000 short-lived pods, each of a
// kind of its own, come and leave, and the arrays moved reads stay at the
// revision's kinds and the one alive, not every kind ever seen.
func TestKindsBetweenRevisionsDoNotGrowTheNumbering(t *testing.T) {
	w := newWorkload()
	steady := counted{kind: kind{milliCPU: 1000, gpus: 1}}
	for i := range 1000 {
		w.set(types.UID(fmt.Sprint("s", i)), steady, nil, true)
	}
	rev, _, _ := w.snapshotPinned(0)
	for i := range 20000 {
		uid := types.UID(fmt.Sprint("t", i))
		w.set(uid, counted{kind: kind{milliCPU: int64(2000 + i), gpus: 1}}, nil, true)
		w.set(uid, counted{}, nil, false)
		w.snapshotPinned(0)
	}
	if r, _, _ := w.snapshotPinned(0); r != rev {
		t.Fatalf("the mix held, yet revision %d after %d", r, rev)
	}
	if len(w.ids) != 1 || len(w.now) > 2 {
		t.Errorf("after 20,000 kinds that came and went: %d kinds numbered, %d counts kept; want 1 and at most 2", len(w.ids), len(w.now))
	}
}

// TestHotStateIsOneCacheLine: the per-node loop reads every node's
// hotState, in one array (page-aligned at a cluster's size): more than a
// cache line a node costs every cycle a second miss a node.
func TestHotStateIsOneCacheLine(t *testing.T) {
	if size := unsafe.Sizeof(hotState{}); size > 64 {
		t.Errorf("hotState is %d bytes, more than a 64-byte cache line", size)
	}
}
