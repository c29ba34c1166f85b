package perf

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/gpuadmit/gpuadmit/scheduler/placement"
)

// measured is the namespace of the harness's measured pods.
const measured = "test"

// stats are GPUAdmit's calls for the measured pods of one workload run:
// how many, and the time spent in them. Safe for concurrent use (the
// scheduler runs Filter and Score over nodes in parallel).
type stats struct {
	pods sync.Map // UIDs of the measured pods the plugin saw
	podCount,
	cycles, // PreFilter calls: scheduling cycles of measured pods
	scoreCalls,
	scored, // Score calls that returned a score (not "unscored")
	preScoreSkips atomic.Int64
	// Nanoseconds inside each of the plugin's extension points. PreFilter,
	// PreScore and NormalizeScore run once a cycle, on the cycle's
	// goroutine; Filter and Score once a node, in parallel, so their sums
	// are CPU time more than wall time.
	preFilter, filter, preScore, score, normalize atomic.Int64
}

func (s *stats) measured(pod *corev1.Pod) bool { return s != nil && pod.Namespace == measured }

func (s *stats) sawPod(uid types.UID) {
	if _, loaded := s.pods.LoadOrStore(uid, true); !loaded {
		s.podCount.Add(1)
	}
}

// countingPlugin is GPUAdmit with its calls for the measured pods counted
// and timed. It embeds the plugin, so it implements every interface the
// plugin does (TestCountingPluginKeepsInterfaces checks the ones the
// scheduler looks for); it overrides the extension points it counts.
type countingPlugin struct {
	*placement.Plugin
	stats *stats
}

func (c *countingPlugin) PreFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if !c.stats.measured(pod) {
		return c.Plugin.PreFilter(ctx, state, pod, nodes)
	}
	start := time.Now()
	r, st := c.Plugin.PreFilter(ctx, state, pod, nodes)
	c.stats.preFilter.Add(int64(time.Since(start)))
	c.stats.cycles.Add(1)
	c.stats.sawPod(pod.UID)
	return r, st
}

func (c *countingPlugin) Filter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, n fwk.NodeInfo) *fwk.Status {
	if !c.stats.measured(pod) {
		return c.Plugin.Filter(ctx, state, pod, n)
	}
	start := time.Now()
	st := c.Plugin.Filter(ctx, state, pod, n)
	c.stats.filter.Add(int64(time.Since(start)))
	return st
}

func (c *countingPlugin) PreScore(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	if !c.stats.measured(pod) {
		return c.Plugin.PreScore(ctx, state, pod, nodes)
	}
	start := time.Now()
	st := c.Plugin.PreScore(ctx, state, pod, nodes)
	c.stats.preScore.Add(int64(time.Since(start)))
	if st.IsSkip() {
		c.stats.preScoreSkips.Add(1)
	}
	return st
}

func (c *countingPlugin) Score(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, n fwk.NodeInfo) (int64, *fwk.Status) {
	if !c.stats.measured(pod) {
		return c.Plugin.Score(ctx, state, pod, n)
	}
	start := time.Now()
	s, st := c.Plugin.Score(ctx, state, pod, n)
	c.stats.score.Add(int64(time.Since(start)))
	c.stats.scoreCalls.Add(1)
	if st.IsSuccess() && s != math.MinInt64 {
		c.stats.scored.Add(1)
	}
	return s, st
}

// ScoreExtensions returns the wrapper, so that NormalizeScore is timed.
func (c *countingPlugin) ScoreExtensions() fwk.ScoreExtensions { return c }

func (c *countingPlugin) NormalizeScore(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	if !c.stats.measured(pod) {
		return c.Plugin.NormalizeScore(ctx, state, pod, scores)
	}
	start := time.Now()
	st := c.Plugin.NormalizeScore(ctx, state, pod, scores)
	c.stats.normalize.Add(int64(time.Since(start)))
	return st
}

// runs are the stats of a benchmark's workload runs, by the harness's
// name of the run (the sub-benchmark's name). The harness runs workloads
// one at a time: begin, before each starts its scheduler, names the run
// the plugin's factory counts for.
type runs struct {
	mu      sync.Mutex
	byName  map[string]*stats
	current *stats
}

func newRuns() *runs { return &runs{byName: map[string]*stats{}} }

func (r *runs) begin(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.current = &stats{}
	r.byName[name] = r.current
}

func (r *runs) get(name string) *stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byName[name]
}

// registry registers GPUAdmit, counted, under its own name, as
// gpuadmit-scheduler does (app.WithPlugin(placement.Name, placement.New)).
func (r *runs) registry() frameworkruntime.Registry {
	return frameworkruntime.Registry{placement.Name: func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		p, err := placement.New(ctx, obj, h)
		if err != nil {
			return nil, err
		}
		pl, ok := p.(*placement.Plugin)
		if !ok {
			return nil, fmt.Errorf("placement.New returned %T, not *placement.Plugin", p)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		return &countingPlugin{Plugin: pl, stats: r.current}, nil
	}}
}

// TestCountingPluginKeepsInterfaces checks that the wrapper is, for the
// scheduler, the same kind of plugin as GPUAdmit: it implements each
// extension point GPUAdmit implements, and no other.
func TestCountingPluginKeepsInterfaces(t *testing.T) {
	var pl fwk.Plugin = &placement.Plugin{}
	var wrapped fwk.Plugin = &countingPlugin{Plugin: &placement.Plugin{}}
	checks := map[string]func(fwk.Plugin) bool{
		"PreEnqueue":        func(p fwk.Plugin) bool { _, ok := p.(fwk.PreEnqueuePlugin); return ok },
		"QueueSort":         func(p fwk.Plugin) bool { _, ok := p.(fwk.QueueSortPlugin); return ok },
		"EnqueueExtensions": func(p fwk.Plugin) bool { _, ok := p.(fwk.EnqueueExtensions); return ok },
		"PreFilter":         func(p fwk.Plugin) bool { _, ok := p.(fwk.PreFilterPlugin); return ok },
		"Filter":            func(p fwk.Plugin) bool { _, ok := p.(fwk.FilterPlugin); return ok },
		"PostFilter":        func(p fwk.Plugin) bool { _, ok := p.(fwk.PostFilterPlugin); return ok },
		"PreScore":          func(p fwk.Plugin) bool { _, ok := p.(fwk.PreScorePlugin); return ok },
		"Score":             func(p fwk.Plugin) bool { _, ok := p.(fwk.ScorePlugin); return ok },
		"Reserve":           func(p fwk.Plugin) bool { _, ok := p.(fwk.ReservePlugin); return ok },
		"Permit":            func(p fwk.Plugin) bool { _, ok := p.(fwk.PermitPlugin); return ok },
		"PreBind":           func(p fwk.Plugin) bool { _, ok := p.(fwk.PreBindPlugin); return ok },
		"Bind":              func(p fwk.Plugin) bool { _, ok := p.(fwk.BindPlugin); return ok },
		"PostBind":          func(p fwk.Plugin) bool { _, ok := p.(fwk.PostBindPlugin); return ok },
		"Sign":              func(p fwk.Plugin) bool { _, ok := p.(fwk.SignPlugin); return ok },
	}
	for name, implements := range checks {
		if got, want := implements(wrapped), implements(pl); got != want {
			t.Errorf("%s: the wrapper implements it: %v, GPUAdmit: %v", name, got, want)
		}
	}
	if wrapped.Name() != placement.Name {
		t.Errorf("the wrapper is called %q, want %q", wrapped.Name(), placement.Name)
	}
	if ext := wrapped.(fwk.ScorePlugin).ScoreExtensions(); ext != fwk.ScoreExtensions(wrapped.(*countingPlugin)) {
		t.Errorf("ScoreExtensions is %T, want the wrapper, which times NormalizeScore", ext)
	}
}
