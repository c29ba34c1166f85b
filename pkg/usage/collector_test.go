package usage_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/usage"
)

type source struct {
	in  usage.Input
	err error
}

func (s source) Input(context.Context) (usage.Input, error) { return s.in, s.err }

func sixPlusSix() usage.Input {
	nodes := []corev1.Node{t4Node("n1", 2, "32")}
	return usage.Input{
		Inventory: inventory.Build(nodes, allocator.Default()), Nodes: nodes,
		Pods:   []*corev1.Pod{pod("a", "p1", "n1", 9216, 0, "1"), pod("a", "p2", "n1", 9216, 0, "1"), pod("b", "w1", "", 10240, 0, "1")},
		GPUs:   t4s(9216, 9216),
		Config: usage.Config{PricePerGPUHour: map[string]float64{"T4": 0.35}},
	}
}

// The series only the leader exports: none before Start, the report while
// leading, none again once the lead is lost.
func TestCollectorExportsOnlyWhileLeading(t *testing.T) {
	c := usage.NewCollector(source{in: sixPlusSix()}, usage.CollectorOptions{}, logr.Discard())
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Fatalf("before leading: %d series, want none", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Start(ctx); close(done) }()
	waitFor(t, func() bool { return testutil.CollectAndCount(c) > 0 })

	want := `
# HELP gpuadmit_stranded_mib Free GPU memory that no pending pod and no typical size of the policy data can use, given the nodes' free CPU and memory, in MiB (docs/metrics.md).
# TYPE gpuadmit_stranded_mib gauge
gpuadmit_stranded_mib{mode="whole",model="T4",pool="t4-whole"} 12288
# HELP gpuadmit_allocated_mib GPU memory held by bound pods, in MiB, by namespace and form (mig, share, whole, time-sliced).
# TYPE gpuadmit_allocated_mib gauge
gpuadmit_allocated_mib{form="share",mode="whole",model="T4",namespace="a",pool="t4-whole"} 18432
# HELP gpuadmit_pending_mib GPU memory the waiting pods ask, in MiB, by namespace and reason.
# TYPE gpuadmit_pending_mib gauge
gpuadmit_pending_mib{mode="whole",model="T4",namespace="b",pool="t4-whole",reason="not_tried"} 10240
# HELP gpuadmit_gpu_allocated_mib GPU memory allocated on one GPU whose allocation is known (DRA), labelled with its UUID as DCGM's exporter labels it.
# TYPE gpuadmit_gpu_allocated_mib gauge
gpuadmit_gpu_allocated_mib{UUID="GPU-a",model="T4",node="n1",pool="t4-whole"} 9216
gpuadmit_gpu_allocated_mib{UUID="GPU-b",model="T4",node="n1",pool="t4-whole"} 9216
# HELP gpuadmit_price_per_gpu_hour The price of one GPU-hour of the model, from the policy data.
# TYPE gpuadmit_price_per_gpu_hour gauge
gpuadmit_price_per_gpu_hour{model="T4"} 0.35
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "gpuadmit_stranded_mib", "gpuadmit_allocated_mib",
		"gpuadmit_pending_mib", "gpuadmit_gpu_allocated_mib", "gpuadmit_price_per_gpu_hour"); err != nil {
		t.Error(err)
	}
	cancel()
	<-done
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Errorf("after losing the lead: %d series, want none", n)
	}
}

func TestCollectorSaysWhenItCannotRead(t *testing.T) {
	c := usage.NewCollector(source{err: errors.New("cache not synced")}, usage.CollectorOptions{}, logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Start(ctx) }()
	waitFor(t, func() bool { return testutil.CollectAndCount(c) > 0 })
	want := "# HELP gpuadmit_usage_up 1 when this scrape computed the report, 0 when reading its input failed.\n# TYPE gpuadmit_usage_up gauge\ngpuadmit_usage_up 0\n"
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

func TestFold(t *testing.T) {
	r := usage.Report{Pools: []usage.Pool{{
		Name: "p",
		Allocated: map[usage.Holder]int64{
			{Namespace: "big", Form: usage.FormWhole}:   1000,
			{Namespace: "mid", Form: usage.FormWhole}:   500,
			{Namespace: "small", Form: usage.FormWhole}: 10,
		},
		Pending: map[usage.Waiter]usage.Waiting{
			{Namespace: "tiny", Reason: usage.ReasonGPU}:  {Pods: 1, MiB: 5},
			{Namespace: "small", Reason: usage.ReasonGPU}: {Pods: 2, MiB: 20},
		},
	}}}
	if n := usage.Fold(&r, 2); n != 2 {
		t.Errorf("folded %d namespaces, want 2", n)
	}
	want := usage.Pool{
		Name: "p",
		Allocated: map[usage.Holder]int64{
			{Namespace: "big", Form: usage.FormWhole}:                1000,
			{Namespace: "mid", Form: usage.FormWhole}:                500,
			{Namespace: usage.OtherNamespace, Form: usage.FormWhole}: 10,
		},
		Pending: map[usage.Waiter]usage.Waiting{{Namespace: usage.OtherNamespace, Reason: usage.ReasonGPU}: {Pods: 3, MiB: 25}},
	}
	if diff := cmp.Diff(want, r.Pools[0]); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatal("timed out")
}

// counting is a source that counts its reads and fails while err is set.
type counting struct {
	reads atomic.Int32
	fail  atomic.Bool
}

func (s *counting) Input(context.Context) (usage.Input, error) {
	s.reads.Add(1)
	if s.fail.Load() {
		return usage.Input{}, errors.New("cache not synced")
	}
	return usage.Input{}, nil
}

// One report serves the scrapes of MinInterval (a pair of Prometheus
// replicas scrapes twice); a failed read is not kept, so the next scrape
// reads again.
func TestCollectorReusesAReportForMinInterval(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Unix(1e9, 0))
	src := &counting{}
	c := usage.NewCollector(src, usage.CollectorOptions{MinInterval: 10 * time.Second, Clock: clk}, logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Start(ctx) }()
	src.fail.Store(true)
	waitFor(t, func() bool { return testutil.CollectAndCount(c) > 0 })
	src.fail.Store(false)
	before := src.reads.Load()
	testutil.CollectAndCount(c)
	testutil.CollectAndCount(c)
	if got := src.reads.Load() - before; got != 1 {
		t.Errorf("after a failed read, two scrapes read %d times, want 1 (a failure is not kept, a success is)", got)
	}
	clk.SetTime(clk.Now().Add(9 * time.Second))
	testutil.CollectAndCount(c)
	if got := src.reads.Load() - before; got != 1 {
		t.Errorf("9s later: %d reads, want still 1", got)
	}
	clk.SetTime(clk.Now().Add(time.Second))
	testutil.CollectAndCount(c)
	if got := src.reads.Load() - before; got != 2 {
		t.Errorf("10s later: %d reads, want 2", got)
	}
}

// The series budget: no series per pod, and at most MaxNamespaces namespace
// names. Twice the pods in the same namespaces, pools, forms and reasons
// give the same series; 1,500 namespaces export 1,000 names and _other.
func TestSeriesBudget(t *testing.T) {
	series := func(pods int) (int, map[string]bool) {
		nodes := []corev1.Node{}
		for i := range 100 {
			nodes = append(nodes, t4Node(fmt.Sprintf("n%03d", i), 8, "128"))
		}
		var ps []*corev1.Pod
		for i := range pods {
			node := fmt.Sprintf("n%03d", i%100)
			if i%10 == 0 {
				node = ""
			}
			ps = append(ps, pod(fmt.Sprintf("ns%04d", i%1500), fmt.Sprintf("p%d", i), node, 1024, 0, "1"))
		}
		in := usage.Input{Inventory: inventory.Build(nodes, allocator.Default()), Nodes: nodes, Pods: ps}
		c := usage.NewCollector(source{in: in}, usage.CollectorOptions{}, logr.Discard())
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { _ = c.Start(ctx) }()
		waitFor(t, func() bool { return testutil.CollectAndCount(c) > 0 })
		ch := make(chan prometheus.Metric, 1<<16)
		c.Collect(ch)
		close(ch)
		names := map[string]bool{}
		n := 0
		for m := range ch {
			n++
			var d dto.Metric
			if err := m.Write(&d); err != nil {
				t.Fatal(err)
			}
			for _, l := range d.GetLabel() {
				if l.GetName() == "namespace" {
					names[l.GetValue()] = true
				}
			}
		}
		return n, names
	}
	n1, names := series(15000)
	n2, _ := series(30000)
	if n1 != n2 {
		t.Errorf("15,000 pods: %d series; 30,000 pods in the same namespaces: %d — the pods changed the count", n1, n2)
	}
	if len(names) != usage.DefaultMaxNamespaces+1 || !names[usage.OtherNamespace] {
		t.Errorf("%d namespace names (with _other: %v), want %d and _other", len(names), names[usage.OtherNamespace], usage.DefaultMaxNamespaces+1)
	}
}
