package placement_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// wideWorkload is a target workload of 126 kinds in 24 GPU shapes, the
// counts of the openb default trace's GPU kinds: shares of 1 to 20 GiB and
// 1, 2, 4 or 8 whole GPUs, with CPU and memory varying within a shape.
func wideWorkload() string {
	var kinds []string
	for i := range 126 {
		shape := i % 24
		cpu, mem := 1+(i*7)%32, 1+(i*13)%64
		if shape < 20 {
			kinds = append(kinds, fmt.Sprintf(`{"gpuMemory":"%dGi","cpu":"%d","memory":"%dGi","weight":%d}`, shape+1, cpu, mem, 1+i%5))
		} else {
			kinds = append(kinds, fmt.Sprintf(`{"gpus":%d,"cpu":"%d","memory":"%dGi","weight":%d}`, 1<<(shape-20), cpu, mem, 1+i%5))
		}
	}
	return `{"workload":[` + strings.Join(kinds, ",") + `]}`
}

// BenchmarkPlacement1213Nodes is one pod's placement by the plugin at the
// trace's 1,213 nodes, under a workload of 126 kinds (wideWorkload): PreScore and Score on every node, each node with 8
// GPUs of which its claims hold a different mix, pods of 8 request shapes
// in turn. Reported per pod; prescore-ns/op is the plugin's PreScore,
// which scores every node (Score only looks the score up).
func BenchmarkPlacement1213Nodes(b *testing.B) {
	c, objs := draCluster(1213, 8, func(i int) string { return fmt.Sprintf("n%04d", i) }, func(i int) int { return i % 11 },
		func(i, j int) (int, int64) { return (i + j) % 8, int64(1 + (i*j)%19) })
	var want []*corev1.Pod
	for k, gibs := range []int64{1, 5, 10, 20, 3, 7, 2, 15} {
		claim := fmt.Sprintf("want-%d", k)
		objs = append(objs, shareClaim(claim, gibs))
		want = append(want, claimPod(claim, claim))
	}
	e := newEnv(b, wideWorkload(), c, objs...)
	infos, err := e.snapshot.NodeInfos().List()
	if err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, podOf func(i int) *corev1.Pod) { benchPlacement(b, e, infos, podOf, false) }
	// seen: 8 requests in turn, each scored on every node before.
	b.Run("seen", func(b *testing.B) { run(b, func(i int) *corev1.Pod { return want[i%len(want)] }) })
	// new: each pod's CPU request differs from every earlier pod's, so no
	// node has its score kept; the nodes' views are.
	b.Run("new", func(b *testing.B) {
		run(b, func(i int) *corev1.Pod {
			p := want[i%len(want)].DeepCopy()
			p.Spec.Containers[0].Resources.Requests["cpu"] = *resource.NewMilliQuantity(int64(1000+i), resource.DecimalSI)
			return p
		})
	})
}

// benchPlacement places podOf(0), podOf(1), … on infos, one pod per
// iteration, and reports the plugin's PreScore per pod (prescore-ns/op).
// With cold, each PreScore starts on caches that hold none of its memory
// (evict).
func benchPlacement(b *testing.B, e *env, infos []fwk.NodeInfo, podOf func(i int) *corev1.Pod, cold bool) {
	b.ReportAllocs()
	var preScore time.Duration
	for i := 0; b.Loop(); i++ {
		p := podOf(i)
		state := framework.NewCycleState()
		if cold {
			evict()
		}
		start := time.Now()
		if st := e.fw.RunPreScorePlugins(e.ctx, state, p, infos); !st.IsSuccess() {
			b.Fatal(st)
		}
		preScore += time.Since(start)
		if _, st := e.fw.RunScorePlugins(e.ctx, state, p, infos); !st.IsSuccess() {
			b.Fatal(st)
		}
	}
	b.ReportMetric(float64(preScore.Nanoseconds())/float64(b.N), "prescore-ns/op")
}

// evictBuf is larger than the caches of the machines these benchmarks
// ran on (not larger than every processor's: some have 96 MB or more).
var evictBuf []byte

// evict writes evictBuf through, so that the caches hold none of what the
// plugin keeps. In the scheduler, PreScore runs after Filter, whose DRA
// plugin evaluates CEL over every node's devices and allocates megabytes:
// in the 1,213-node replay the plugin's per-node loop alone took about
// 0.2 µs a node in the median cycle, five times what the whole PreScore
// takes a node in a benchmark that runs PreScore after PreScore.
func evict() {
	if evictBuf == nil {
		evictBuf = make([]byte, 64<<20)
	}
	for i := 0; i < len(evictBuf); i += 64 {
		evictBuf[i]++
	}
}

// BenchmarkPlacement1213NodesAlternatives is BenchmarkPlacement1213Nodes
// for pods whose claims list alternatives, as gpuadmit's webhook writes
// them where a pod may run on several DRA pools: the 1,213 nodes are of
// three models (A100 40GB, A100 80GB, H100 80GB, 8 GPUs each, in turn),
// their claims holding a different mix on each, and the pods take turns
// among 8 lists of two or three shares, one per model, in different
// orders and sizes. Each node's score predicts the alternative the
// allocator takes there (a search over its GPUs) and prices it.
func BenchmarkPlacement1213NodesAlternatives(b *testing.B) {
	benchAlternatives(b, func(i int) int { return i % 11 }, func(i, j int) (int, int64) { return (i + j) % 8, int64(1 + (i*j)%19) })
}

// BenchmarkPlacement1213NodesAlikeAlternatives is
// BenchmarkPlacement1213NodesAlternatives on a cluster whose nodes are in
// few states, as a packing scheduler leaves one (the replay's cycles
// compute about one node in ten): four nodes in five are idle, and the
// others hold one of seven mixes, so that the 1,213 nodes are in 24
// states (three models, eight mixes counting none). A new request's first
// pass meets every node and computes one of each state.
func BenchmarkPlacement1213NodesAlikeAlternatives(b *testing.B) {
	benchAlternatives(b, func(i int) int {
		if i%5 != 0 {
			return 0
		}
		return 1 + (i/5)%7
	}, func(i, j int) (int, int64) { return j, int64(1 + (j*5+(i/5)%7)%19) })
}

// benchAlternatives runs the sub-benchmarks of
// BenchmarkPlacement1213NodesAlternatives on 1,213 nodes of three models,
// node i with claims(i) pods whose claims hold hold(i, j): a GPU and GiB.
func benchAlternatives(b *testing.B, claims func(i int) int, hold func(i, j int) (int, int64)) {
	models := []struct {
		name string
		gibs int64
	}{{"A100-40GB", 40}, {"A100-80GB", 80}, {"H100-80GB", 80}}
	var c cluster
	var objs []runtime.Object
	for i := range 1213 {
		nn, m := fmt.Sprintf("n%04d", i), models[i%len(models)]
		objs = append(objs, modelSlice(nn, m.name, 8, m.gibs))
		var pods []*corev1.Pod
		for j := range claims(i) {
			claim := fmt.Sprintf("%s-c%d", nn, j)
			device, gibs := hold(i, j)
			objs = append(objs, heldClaim(claim, nn, fmt.Sprintf("gpu-%d", device), gibs))
			pods = append(pods, claimPod(claim, claim))
		}
		c.add(node(nn), pods...)
	}
	names := []string{"H100-80GB", "A100-80GB", "A100-40GB"}
	var want []*corev1.Pod
	for k, gibs := range []int64{1, 5, 10, 20, 3, 7, 2, 15} {
		claim := fmt.Sprintf("want-%d", k)
		order := []string{names[k%3], names[(k+1)%3]}
		if k%2 == 0 {
			order = append(order, names[(k+2)%3])
		}
		objs = append(objs, shareAlternatives(claim, gibs, order...))
		want = append(want, claimPod(claim, claim))
	}
	e := newEnv(b, wideWorkload(), c, objs...)
	infos, err := e.snapshot.NodeInfos().List()
	if err != nil {
		b.Fatal(err)
	}
	// The pods are sized: their scores rank the nodes, not tie them.
	scores, _ := e.scores(b, want[0])
	ranks := map[int64]bool{}
	for _, s := range scores {
		ranks[s] = true
	}
	if len(ranks) < 10 {
		b.Fatalf("the pod's scores take %d values over %d nodes: not sized", len(ranks), len(scores))
	}
	seen := func(i int) *corev1.Pod { return want[i%len(want)] }
	// fresh pods each ask a CPU no pod asked before, in this run or an
	// earlier one.
	cpu := int64(1000)
	fresh := func(i int) *corev1.Pod {
		p := want[i%len(want)].DeepCopy()
		cpu++
		p.Spec.Containers[0].Resources.Requests["cpu"] = *resource.NewMilliQuantity(cpu, resource.DecimalSI)
		return p
	}
	// warm scores the pods of seen once, so that none is new to the
	// nodes when the timing starts (a run of more than maxRequests new
	// pods before it starts the numbering over).
	warm := func(b *testing.B) {
		for _, p := range want {
			e.scores(b, p)
		}
	}
	b.Run("seen", func(b *testing.B) { warm(b); benchPlacement(b, e, infos, seen, false) })
	b.Run("new", func(b *testing.B) { benchPlacement(b, e, infos, fresh, false) })
	// cold: each PreScore on caches emptied, as the scheduler's Filter
	// leaves them.
	b.Run("seen-cold", func(b *testing.B) { warm(b); benchPlacement(b, e, infos, seen, true) })
	b.Run("new-cold", func(b *testing.B) { benchPlacement(b, e, infos, fresh, true) })
	// changed-cold: seen-cold, with three nodes changed before each pod
	// (a new generation, as a pod coming or leaving gives a node), whose
	// views are built again: an ordinary cycle in the replay has one to
	// three.
	b.Run("changed-cold", func(b *testing.B) {
		warm(b)
		gen := int64(1 << 40)
		benchPlacement(b, e, infos, func(i int) *corev1.Pod {
			for j := range 3 {
				gen++
				infos[(7*i+j*401)%len(infos)].(*framework.NodeInfo).Generation = gen
			}
			return want[i%len(want)]
		}, true)
	})
}
