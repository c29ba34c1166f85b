package webhook

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

const (
	migPool   = "h100-inference"
	sharePool = "t4-shared"
	slice     = "nvidia.com/mig-1g.10gb"
	node      = "h100-mig-1"
)

// smallCluster is the example cluster's h100-mig-1, cut down to slices
// 1g.10gb (3000 MiB goes there first), and its T4 share pool (where 3000
// MiB falls back to).
func smallCluster(t *testing.T, slices int64) *inventory.Inventory {
	t.Helper()
	f, err := os.Open("../../examples/nodes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	all, err := inventory.ReadNodes(f)
	if err != nil {
		t.Fatal(err)
	}
	var nodes []corev1.Node
	for _, n := range all {
		switch n.Name {
		case node:
			n.Status.Allocatable[slice] = *resource.NewQuantity(slices, resource.DecimalSI)
			delete(n.Status.Allocatable, "nvidia.com/mig-3g.40gb")
			nodes = append(nodes, n)
		case "t4-shared-0":
			nodes = append(nodes, n)
		}
	}
	return inventory.Build(nodes, allocator.Default())
}

// fixture is a Mutator whose free capacity comes from a fake pod cache.
type fixture struct {
	m     *mutate.Mutator
	cache client.Client
	capa  *capacity
	clock *clocktesting.FakePassiveClock
	inv   *inventory.Inventory
}

func newFixture(t *testing.T, slices int64, cached ...client.Object) *fixture {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(cached...).Build()
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	capa := newCapacity(clk, logr.Discard())
	for _, o := range cached { // as the informer delivers what the cache starts with
		capa.Handler().OnAdd(o, true)
	}
	engine := policy.NewEngine(policy.Options{})
	if _, err := engine.Load(context.Background(), policy.Embedded()); err != nil {
		t.Fatal(err)
	}
	inv := smallCluster(t, slices)
	m := mutate.NewMutator(engine, mutate.StaticInventory{Inv: inv}, mutate.MutatorOptions{Capacity: capa})
	return &fixture{m: m, cache: c, capa: capa, clock: clk, inv: inv}
}

// asking is a new pod asking for 3000 MiB, named or (name "") generated.
func asking(name string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"}}
	if name == "" {
		p.GenerateName = "burst-"
	}
	p.Spec.Containers = []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{"gpuadmit.io/gpu-memory": resource.MustParse("3000Mi")}}}}
	return p
}

// holding is a pod gpuadmit placed on the MIG pool, holding one slice.
func holding(name, nodeName, nominated string, phase corev1.PodPhase) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a",
		Labels:      map[string]string{mutate.LabelManaged: "true"},
		Annotations: map[string]string{record.AnnotationDecision: "main: 1 GPU with 3000 MiB -> " + slice + "=1 [default/memory-to-mig]; pool " + migPool + "; revision r1"}}}
	one := corev1.ResourceList{slice: resource.MustParse("1"), "gpuadmit.io/gpu-memory-mib": resource.MustParse("9984")}
	p.Spec.Containers = []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Limits: one, Requests: one}}}
	p.Spec.NodeName, p.Status.NominatedNodeName, p.Status.Phase = nodeName, nominated, phase
	return p
}

// allShares is a pod holding every share of the T4 node.
func allShares() *corev1.Pod {
	p := holding("shares", "t4-shared-0", "", corev1.PodRunning)
	all := corev1.ResourceList{"gpuadmit.io/gpu-mem": resource.MustParse("16")}
	p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: all, Requests: all}
	return p
}

func (f *fixture) admit(t *testing.T, p *corev1.Pod) mutate.Result {
	t.Helper()
	res, err := f.m.Mutate(context.Background(), mutate.Request{Pod: p})
	if err != nil {
		t.Fatalf("Mutate: %v", err)
	}
	if !res.Allowed {
		t.Fatalf("denied: %s", res.Message)
	}
	return res
}

func TestAFullPoolFallsBackToTheNextCandidate(t *testing.T) {
	run, wait := corev1.PodRunning, corev1.PodPending
	tests := map[string]struct {
		cached []client.Object
		want   string
	}{
		"an empty MIG pool takes it":             {want: migPool},
		"one slice of two held: room for one":    {cached: []client.Object{holding("a", node, "", run)}, want: migPool},
		"both slices held by running pods":       {cached: []client.Object{holding("a", node, "", run), holding("b", node, "", run)}, want: sharePool},
		"both slices held by nominated pods":     {cached: []client.Object{holding("a", "", node, wait), holding("b", "", node, wait)}, want: sharePool},
		"one running, one waiting for a node":    {cached: []client.Object{holding("a", node, "", run), holding("b", "", "", wait)}, want: sharePool},
		"finished pods hold nothing":             {cached: []client.Object{holding("a", node, "", corev1.PodSucceeded), holding("b", node, "", corev1.PodFailed)}, want: migPool},
		"pods on nodes of other pools count not": {cached: []client.Object{holding("a", "t4-shared-0", "", run), holding("b", "elsewhere", "", run)}, want: migPool},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, 2, tc.cached...)
			res := f.admit(t, asking("new"))
			if got := mutate.PoolOf(res.Pod); got != tc.want {
				t.Errorf("pool %s, want %s; explanation: %s", got, tc.want, res.Explanation)
			}
		})
	}
}

func TestFallbackExplanationNamesTheFullPoolAndSaysBestEffort(t *testing.T) {
	f := newFixture(t, 2, holding("a", node, "", corev1.PodRunning), holding("b", node, "", corev1.PodRunning))
	res := f.admit(t, asking("new"))
	for _, want := range []string{
		"pool " + migPool + ": full: no node of its 1 the pod may run on has",
		"best effort",
		"the scheduler decides",
	} {
		if !strings.Contains(res.Explanation, want) {
			t.Errorf("explanation lacks %q: %s", want, res.Explanation)
		}
	}
	if len(res.PassedOver) != 1 || !strings.HasPrefix(res.PassedOver[0], "pool "+migPool+": full") {
		t.Errorf("PassedOver = %q, want the full MIG pool (a GPUFallback Event)", res.PassedOver)
	}
}

// TestWhenEveryPoolIsFullThePodWaits: a full cluster queues pods rather
// than deny them; the explanation says they wait.
func TestWhenEveryPoolIsFullThePodWaits(t *testing.T) {
	f := newFixture(t, 2, holding("a", node, "", corev1.PodRunning), holding("b", node, "", corev1.PodRunning), allShares())
	res := f.admit(t, asking("new"))
	want := "No pool offered had room (pool " + migPool + ": full"
	if !strings.Contains(res.Explanation, want) || !strings.Contains(res.Explanation, "waits for room on pool "+migPool) {
		t.Errorf("explanation lacks %q and that the pod waits: %s", want, res.Explanation)
	}
}

// TestABurstFillsThePoolThenFallsBack: pods admitted a moment ago count
// before the cache shows them, exactly once after it does, and a deleted
// pod frees its room.
func TestABurstFillsThePoolThenFallsBack(t *testing.T) {
	f := newFixture(t, 3)
	var admitted []*corev1.Pod
	var pools []string
	for range 5 {
		res := f.admit(t, asking(""))
		admitted = append(admitted, res.Pod)
		pools = append(pools, mutate.PoolOf(res.Pod))
	}
	want := []string{migPool, migPool, migPool, sharePool, sharePool}
	if diff := cmp.Diff(want, pools); diff != "" {
		t.Fatalf("burst of 5 against 3 slices, pools (-want +got):\n%s", diff)
	}

	// The cache catches up: the API server named the pods, the scheduler has not placed them.
	for i, p := range admitted {
		p.Name = fmt.Sprintf("burst-%d", i)
		if err := f.cache.Create(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		f.capa.Handler().OnAdd(p, false)
	}
	held := f.capa.Held(context.Background(), f.pool(t, migPool))
	if diff := cmp.Diff(map[string]int64{slice: 3}, pick(held.Pending, slice)); diff != "" {
		t.Errorf("pending on the MIG pool once the cache shows the burst (-want +got):\n%s", diff)
	}
	if got := mutate.PoolOf(f.admit(t, asking("sixth")).Pod); got != sharePool {
		t.Errorf("sixth pod went to %s, want %s (the MIG pool is still full)", got, sharePool)
	}

	if err := f.cache.Delete(context.Background(), admitted[0]); err != nil {
		t.Fatal(err)
	}
	f.capa.Handler().OnDelete(admitted[0])
	if got := mutate.PoolOf(f.admit(t, asking("seventh")).Pod); got != migPool {
		t.Errorf("after a MIG pod was deleted the next went to %s, want %s", got, migPool)
	}
}

// TestAnAdmissionTheCacheNeverShowsExpires: a pod the API server refused
// after the webhook admitted it (quota, a later webhook) stops counting.
func TestAnAdmissionTheCacheNeverShowsExpires(t *testing.T) {
	f := newFixture(t, 1)
	if got := mutate.PoolOf(f.admit(t, asking("refused-later")).Pod); got != migPool {
		t.Fatalf("first pod went to %s, want %s", got, migPool)
	}
	if got := mutate.PoolOf(f.admit(t, asking("second")).Pod); got != sharePool {
		t.Errorf("second pod went to %s, want %s while the first counts", got, sharePool)
	}
	f.clock.SetTime(f.clock.Now().Add(ledgerTTL))
	if got := mutate.PoolOf(f.admit(t, asking("third")).Pod); got != migPool {
		t.Errorf("after the TTL the next pod went to %s, want %s", got, migPool)
	}
}

// TestDryRunsAndReinvocationsTakeNoRoom: a dry run creates nothing, and an
// admitted pod decided again (reinvocation) keeps its pool although it now
// holds that pool's last slice.
func TestDryRunsAndReinvocationsTakeNoRoom(t *testing.T) {
	f := newFixture(t, 1)
	if _, err := f.m.Mutate(context.Background(), mutate.Request{Pod: asking("dry"), DryRun: true}); err != nil {
		t.Fatal(err)
	}
	first := f.admit(t, asking("first"))
	if got := mutate.PoolOf(first.Pod); got != migPool {
		t.Fatalf("first pod after a dry run went to %s, want %s", got, migPool)
	}
	again := f.admit(t, first.Pod)
	if len(again.Patch) != 0 {
		t.Errorf("reinvocation patched %v, want nothing", again.Patch)
	}
	f.capa.Handler().OnAdd(first.Pod, false) // drops the one admission; nothing else to drop
	if got := f.capa.ledger.pending(migPool); len(got) != 0 {
		t.Errorf("ledger still holds %v after the cache showed the only admitted pod", got)
	}
}

func TestPoolOfReadsTheRecord(t *testing.T) {
	tests := map[string]struct {
		decision string
		want     string
	}{
		"one container": {decision: "main: 1 GPU -> nvidia.com/gpu=1 (81920 MiB) [r]; pool a100-80gb-whole; revision abc", want: "a100-80gb-whole"},
		"two":           {decision: "a: x -> y [r]; b: x -> y [r]; pool p; revision sha256-1", want: "p"},
		"no record":     {want: ""},
		"no revision":   {decision: "a: x; pool p", want: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := &corev1.Pod{}
			if tc.decision != "" {
				p.Annotations = map[string]string{record.AnnotationDecision: tc.decision}
			}
			if got := mutate.PoolOf(p); got != tc.want {
				t.Errorf("PoolOf = %q, want %q", got, tc.want)
			}
		})
	}
}

func (f *fixture) pool(t *testing.T, name string) *inventory.Pool {
	t.Helper()
	p, ok := f.inv.Pool(name)
	if !ok {
		t.Fatalf("no pool %s", name)
	}
	return p
}

func pick(m map[string]int64, keys ...string) map[string]int64 {
	out := map[string]int64{}
	for _, k := range keys {
		out[k] = m[k]
	}
	return out
}

// TestARefusedAdmissionStopsCountingOnceALaterPodShows: the API server
// refused the first pod after the webhook; once the cache shows a pod
// admitted after it, the first no longer holds the MIG pool's last slice,
// long before the ledger's TTL.
func TestARefusedAdmissionStopsCountingOnceALaterPodShows(t *testing.T) {
	f := newFixture(t, 1)
	if got := mutate.PoolOf(f.admit(t, asking("refused-later")).Pod); got != migPool {
		t.Fatalf("first pod went to %s, want %s", got, migPool)
	}
	f.clock.SetTime(f.clock.Now().Add(ledgerOvertake + time.Second))
	second := f.admit(t, asking("second"))
	if got := mutate.PoolOf(second.Pod); got != sharePool {
		t.Fatalf("second pod went to %s, want %s while the first counts", got, sharePool)
	}
	f.capa.Handler().OnAdd(second.Pod, false)
	if got := mutate.PoolOf(f.admit(t, asking("third")).Pod); got != migPool {
		t.Errorf("once the cache showed a later pod the third went to %s, want %s (the first was refused)", got, migPool)
	}
}

// TestAnAdmissionWithinTheOvertakeKeepsCounting: two pods admitted a moment
// apart may be written in either order; the cache showing the second says
// nothing of the first, which keeps counting.
func TestAnAdmissionWithinTheOvertakeKeepsCounting(t *testing.T) {
	f := newFixture(t, 1)
	if got := mutate.PoolOf(f.admit(t, asking("slow-write")).Pod); got != migPool {
		t.Fatalf("first pod went to %s, want %s", got, migPool)
	}
	f.clock.SetTime(f.clock.Now().Add(ledgerOvertake / 2))
	second := f.admit(t, asking("second"))
	f.capa.Handler().OnAdd(second.Pod, false)
	if got := mutate.PoolOf(f.admit(t, asking("third")).Pod); got != sharePool {
		t.Errorf("third pod went to %s, want %s (the first, admitted a moment before the second, still counts)", got, sharePool)
	}
}

// TestAPodItsQuotaRefusesTakesNoRoom: the namespace's gpuadmit
// ResourceQuota has less MiB left than the pod asks, so the API server
// will refuse it after the webhook; it holds no room against another
// namespace's next pod.
func TestAPodItsQuotaRefusesTakesNoRoom(t *testing.T) {
	f := newFixture(t, 1)
	mib := corev1.ResourceName("requests." + inventory.ResourceMemoryMiB)
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "gpuadmit", Namespace: "team-a"},
		Status: corev1.ResourceQuotaStatus{
			Hard: corev1.ResourceList{mib: resource.MustParse("20000")},
			Used: corev1.ResourceList{mib: resource.MustParse("15000")}}}
	res, err := f.m.Mutate(context.Background(), mutate.Request{Pod: asking("over-quota"), Quota: q})
	if err != nil || !res.Allowed {
		t.Fatalf("Mutate: %v, allowed %v (%s)", err, res.Allowed, res.Message)
	}
	if got := mutate.PoolOf(res.Pod); got != migPool {
		t.Fatalf("over-quota pod went to %s, want %s (the webhook leaves the refusal to ResourceQuota)", got, migPool)
	}
	other := asking("other-team")
	other.Namespace = "team-b"
	if got := mutate.PoolOf(f.admit(t, other).Pod); got != migPool {
		t.Errorf("another namespace's pod went to %s, want %s (the refused pod holds nothing)", got, migPool)
	}
}

// TestAPoolWhoseFreeGPUsHaveNoCPULeftIsSkipped: the MIG pool has a slice
// free, on its one node, where gpuadmit's pods hold all 96 CPUs (or all its
// memory): a pod asking 1 CPU cannot run there, so it goes to the next
// pool; with CPU left beside the slice, it stays on the MIG pool.
func TestAPoolWhoseFreeGPUsHaveNoCPULeftIsSkipped(t *testing.T) {
	run := corev1.PodRunning
	withCompute := func(p *corev1.Pod, cpu, mem string) *corev1.Pod {
		r := p.Spec.Containers[0].Resources.Requests.DeepCopy()
		if r == nil {
			r = corev1.ResourceList{}
		}
		r[corev1.ResourceCPU], r[corev1.ResourceMemory] = resource.MustParse(cpu), resource.MustParse(mem)
		p.Spec.Containers[0].Resources.Requests = r
		return p
	}
	tests := map[string]struct {
		holder *corev1.Pod
		want   string
	}{
		"every CPU of the node held":    {holder: withCompute(holding("a", node, "", run), "96", "1Gi"), want: sharePool},
		"all its memory held":           {holder: withCompute(holding("a", node, "", run), "1", "1Ti"), want: sharePool},
		"a nominated pod holds the CPU": {holder: withCompute(holding("a", "", node, corev1.PodPending), "96", "1Gi"), want: sharePool},
		"CPU and memory left beside it": {holder: withCompute(holding("a", node, "", run), "95", "1000Gi"), want: migPool},
		"a finished pod holds no CPU":   {holder: withCompute(holding("a", node, "", corev1.PodSucceeded), "96", "1Ti"), want: migPool},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, 2, tc.holder)
			p := withCompute(asking("wants-a-cpu"), "1", "1Gi")
			res := f.admit(t, p)
			if got := mutate.PoolOf(res.Pod); got != tc.want {
				t.Errorf("pod went to %s, want %s; explanation: %s", got, tc.want, res.Explanation)
			}
			if why := "also has cpu=1, memory=1Gi free"; tc.want == sharePool && !strings.Contains(res.Explanation, why) {
				t.Errorf("explanation %q does not say %q", res.Explanation, why)
			}
		})
	}
}
