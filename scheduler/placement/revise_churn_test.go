package placement

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// churnNodes is n device-plugin nodes of two models, each with some share
// pods, how many by salt: two calls with other salts give every node two
// states to change between.
func churnNodes(n, salt int) []fwk.NodeInfo {
	offer := `{"resource":"gpuadmit.io/gpu-mem","unitMiB":10240,"sharesPerGPU":4}`
	gpus := `[{"index":0,"healthy":true,"migMode":"Disabled","memoryMiB":40960},{"index":1,"healthy":true,"migMode":"Disabled","memoryMiB":40960}]`
	var nodes []fwk.NodeInfo
	for i := range n {
		model := []string{"A10", "T4"}[i%2]
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i), Annotations: map[string]string{
			allocator.AnnotationGPUs: strings.ReplaceAll(gpus, `"index"`, `"model":"`+model+`","index"`), allocator.AnnotationShare: offer}}}
		node.Status.Allocatable = corev1.ResourceList{"cpu": resource.MustParse("64"), "memory": resource.MustParse("256Gi")}
		var pods []*corev1.Pod
		for j := range (i*7 + salt) % 9 {
			pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d-%d", i, j), UID: types.UID(fmt.Sprintf("n%d-%d", i, j))},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					"cpu": resource.MustParse("1"), allocator.ResourceShare: *resource.NewQuantity(int64(1+(i+j)%3), resource.DecimalSI)}}}}}})
		}
		info := framework.NewNodeInfo(pods...)
		info.SetNode(node)
		nodes = append(nodes, info)
	}
	return nodes
}

// Cycles run while pods come, go and change kind, nodes change, and the
// revisions they cause are made and warmed off the cycle: one warm at a
// time (a revision waits for the last one's), and at the end the kept
// scores are those of a plugin that never saw the nodes. Run it with
// -race: the workload, the cache and the node states are each touched by
// the cycle, the pod handler and the revision's goroutine.
func TestRevisionsOffTheCycleUnderChurn(t *testing.T) {
	nodes, other := churnNodes(200, 0), churnNodes(200, 1)
	r, err := readRequest(&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{"cpu": resource.MustParse("1"), allocator.ResourceShare: resource.MustParse("1")}}}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pl := &Plugin{work: newWorkload()}
	var warms, warming, most atomic.Int64
	pl.work.revised = func(rev uint64, kinds []weighted, pinned []pinnedKind) {
		warms.Add(1)
		n := warming.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		pl.nodes.warm(pl.placers.getFor(pl, rev, kinds, pinned, true))
		warming.Add(-1)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // the pod handler
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			phase := (i / 2000) % 7 // the mix drifts, so that revisions come
			k := kind{milliCPU: int64(1000 * (1 + (phase+i%2)%7)), gpus: 1, item: item{shares: int64(1 + (phase+i%3)%3)}}
			pl.work.set(types.UID(fmt.Sprint(i%300)), counted{kind: k}, nil, i%11 != 0)
			if i%50 == 0 {
				runtime.Gosched()
			}
		}
	})
	// At least 1,500 cycles, and on until several revisions were warmed:
	// on a busy machine the pod handler's goroutine may get little time.
	deadline := time.Now().Add(20 * time.Second)
	for c := 0; c < 1500 || warms.Load() < 5 && time.Now().Before(deadline); c++ {
		if c%7 == 0 { // a node changes, as the scheduler's cache gives it a new NodeInfo
			j := c % len(nodes)
			nodes[j], other[j] = other[j], nodes[j]
		}
		rev, kinds, pinned := pl.work.snapshotPinned(pl.nodes.refreshCycles(len(nodes)))
		cy := pl.nodes.score(pl, nodes, r, pl.placers.get(pl, rev, kinds, pinned))
		for _, n := range nodes {
			cy.lookup(n)
		}
	}
	close(stop)
	wg.Wait()
	pl.work.wait()
	if warms.Load() < 3 || most.Load() != 1 {
		t.Errorf("%d revisions warmed, at most %d at once; want several, one at a time", warms.Load(), most.Load())
	}
	set := pl.placers.get(pl, pl.work.rev, pl.work.kinds, pl.work.pinned)
	pl.nodes.refreshAtMost = len(nodes) // every stale score refreshed
	got := scoresOf(pl.nodes.score(pl, nodes, r, set), nodes)
	fresh := newPlacerSet(set.rev, set.kinds)
	fresh.prices = set.prices
	var never nodeStates
	if want := scoresOf(never.score(&Plugin{}, nodes, r, fresh), nodes); fmt.Sprint(want) != fmt.Sprint(got) {
		t.Errorf("after the churn, scores differ from a plugin that never saw the nodes:\n got %v\nwant %v", got, want)
	}
}
