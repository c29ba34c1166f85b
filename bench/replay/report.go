package replay

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/gpuadmit/gpuadmit/bench/admission"
	"github.com/gpuadmit/gpuadmit/bench/packing"
)

// Report is a replay's outcome, as results.json holds it.
type Report struct {
	Started   time.Time         `json:"started"`
	Finished  time.Time         `json:"finished"`
	Machine   admission.Machine `json:"machine"`
	Settings  Settings          `json:"settings"`
	Simulated []Simulated       `json:"simulated"`
	Replayed  []Replayed        `json:"replayed"`
}

// Settings say what was replayed.
type Settings struct {
	Workload   string `json:"workload"`
	Seed       uint64 `json:"seed"`
	Nodes      int    `json:"nodes"`
	TraceNodes int    `json:"traceNodes"` // all of the trace's, when Nodes is fewer
	GPUs       int    `json:"gpus"`
	Pods       int    `json:"pods"` // created: the inflated workload up to 100% arrived
	Listed     int    `json:"listed"`
	// SchedulerWorkload is gpuadmit-scheduler's target workload
	// (Options.SchedulerWorkload).
	SchedulerWorkload string `json:"schedulerWorkload,omitempty"`
	// SchedulerCPUs and RestCPUs are the CPUs the scheduler ran on by
	// itself and those of everything else; empty when all shared all.
	SchedulerCPUs string `json:"schedulerCPUs,omitempty"`
	// MaxPending is Options.MaxPending: 0 where the creates were not paced.
	MaxPending int    `json:"maxPending,omitempty"`
	RestCPUs   string `json:"restCPUs,omitempty"`
}

// Replayed is one configuration's replay.
type Replayed struct {
	Config        string          `json:"config"`
	SchedulerName string          `json:"schedulerName"`
	Points        []packing.Point `json:"points"`
	Bound         int             `json:"bound"`
	Pending       int             `json:"pending"`
	CreateSeconds float64         `json:"createSeconds"` // creating every pod, one at a time
	SettleSeconds float64         `json:"settleSeconds"` // from the first create to every pod settled
	Timings       []Timing        `json:"timings"`
	Scoring       *Scoring        `json:"scoring,omitempty"` // gpuadmit-scheduler's
	Placements    []Placement     `json:"placements"`        // by pod, in arrival order
	// Usage is gpuadmit's usage figures (stranded, fragmentation,
	// allocated, pending) over the pods' arrival (UsageTrace); none on the
	// product's path.
	Usage []UsagePoint `json:"usage"`
	// Product is how the webhook wrote the GPU pods, on the product's
	// path (checkProduct); nil elsewhere.
	Product *ProductCheck `json:"product,omitempty"`
}

// At is the point at arrived (a zero Point when the run has none there).
func (r Replayed) At(arrived float64) packing.Point { return pointAt(r.Points, arrived) }

// At is the point at arrived.
func (s Simulated) At(arrived float64) packing.Point { return pointAt(s.Points, arrived) }

func pointAt(ps []packing.Point, arrived float64) packing.Point {
	for _, p := range ps {
		if math.Abs(p.Arrived-arrived) < 1e-9 {
			return p
		}
	}
	return packing.Point{Arrived: arrived, UnallocatedPct: math.NaN()}
}

func newReport(o Options, w Workload) *Report {
	all, _ := packing.LoadNodes(o.Trace, "")
	gpus := 0
	for _, n := range w.Nodes {
		gpus += n.GPUs
	}
	return &Report{Started: time.Now().UTC(), Machine: admission.MachineNow(), Settings: Settings{
		Workload: o.Workload, Seed: o.Seed, Nodes: len(w.Nodes), TraceNodes: len(all), GPUs: gpus,
		Pods: len(w.Pods), Listed: len(w.Listed), SchedulerWorkload: o.SchedulerWorkload, MaxPending: o.MaxPending,
	}}
}

// Markdown writes the report's tables.
func (r *Report) Markdown(w io.Writer) {
	s := r.Settings
	fmt.Fprintf(w, "Workload %s, seed %d: %d nodes (%d GPUs), %d pods created in trace order (the pod list of %d inflated to 130%% and cut at 100%% arrived).\n",
		s.Workload, s.Seed, s.Nodes, s.GPUs, s.Pods, s.Listed)
	if s.Nodes < s.TraceNodes {
		fmt.Fprintf(w, "**Scaled down**: %d of the trace's %d nodes (a seeded sample), the workload inflated against their capacity.\n", s.Nodes, s.TraceNodes)
	}
	if s.SchedulerWorkload == WorkloadListed {
		fmt.Fprintf(w, "gpuadmit-scheduler's target workload: fixed to the pod list's %d pods (GPUAdmit's args), not derived from the pods it has seen.\n", s.Listed)
	}
	if s.MaxPending > 0 {
		fmt.Fprintf(w, "Creates paced: a pod was created only while at most %d of those created were neither bound nor unschedulable.\n", s.MaxPending)
	} else {
		fmt.Fprintln(w, "Creates not paced: the pods were created as fast as the API server took them, ahead of the scheduler.")
	}
	fmt.Fprintf(w, "Machine: %s, %d cores, load before %s, after %s.\n", r.Machine.CPU, r.Machine.Cores, r.Machine.LoadBefore, r.Machine.LoadAfter)
	if s.SchedulerCPUs != "" {
		fmt.Fprintf(w, "The scheduler ran by itself on CPU %s; etcd, kube-apiserver and the replay, which creates the pods, on CPU %s.\n", s.SchedulerCPUs, s.RestCPUs)
	} else {
		fmt.Fprintln(w, "The scheduler shared every CPU with etcd, kube-apiserver and the replay, which creates the pods.")
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| run | unallocated GPU % @100% arrived | @90% | @80% | pods placed | pending | scheduling time (s) |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, x := range r.Replayed {
		fmt.Fprintf(w, "| replay: %s (%s) | %.2f | %.2f | %.2f | %d | %d | %.0f |\n", x.Config, x.SchedulerName,
			x.At(1).UnallocatedPct, x.At(0.9).UnallocatedPct, x.At(0.8).UnallocatedPct, x.Bound, x.Pending, x.SettleSeconds)
	}
	for _, x := range r.Simulated {
		fmt.Fprintf(w, "| simulator: %s | %.2f | %.2f | %.2f | %d | %d | |\n", x.Policy,
			x.At(1).UnallocatedPct, x.At(0.9).UnallocatedPct, x.At(0.8).UnallocatedPct, s.Pods-x.Failed, x.Failed)
	}
	r.targets(w)
	r.productMarkdown(w)
	r.usageMarkdown(w)
	for _, x := range r.Replayed {
		if len(x.Timings) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nTimings of %s (%s; ms; quantiles interpolated in the histogram's buckets, p99 bound = the bucket bound it lies under):\n\n", x.Config, x.SchedulerName)
		fmt.Fprintln(w, "| metric | samples | mean | p50 | p99 | p99 bound |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
		for _, t := range x.Timings {
			fmt.Fprintf(w, "| %s | %.0f | %.3f | %.3f | %.3f | %s |\n", t.Metric, t.Samples, t.MeanMs, t.P50Ms, t.P99Ms, boundString(t.P99Bound))
		}
		if sc := x.Scoring; sc != nil {
			fmt.Fprintf(w, "\nGPUAdmit's cycles: %.0f; node scores computed afresh a cycle: mean %.1f, p50 %.1f, p99 %.1f; score sets made: %.0f for a new workload revision (each makes every kept score stale), %.0f for new prices.\n",
				sc.Cycles, sc.ComputedMean, sc.ComputedP50, sc.ComputedP99, sc.SetsWorkload, sc.SetsPrices)
			if sc.OverTarget >= 0 {
				fmt.Fprintf(w, "Cycles whose placement took over %g ms, the target: %.0f, %.2f%% (the p99 is under the target only below 1%%).\n",
					1000*placementTarget, sc.OverTarget, 100*sc.OverTarget/sc.Cycles)
			}
		}
	}
}

func boundString(ms float64) string {
	if ms < 0 {
		return "+Inf"
	}
	return fmt.Sprintf("%.3f", ms)
}

// targets states the replay's placement targets against the numbers.
func (r *Report) targets(w io.Writer) {
	var g *Replayed
	for i := range r.Replayed {
		if r.Replayed[i].Config == GPUAdmit {
			g = &r.Replayed[i]
		}
	}
	if g == nil {
		return
	}
	fmt.Fprintln(w)
	got := g.At(1).UnallocatedPct
	for _, sim := range r.Simulated {
		if sim.Policy == "gpuadmit" || sim.Policy == "gpuadmit-firstfit" {
			d := got - sim.At(1).UnallocatedPct
			fmt.Fprintf(w, "- gpuadmit-scheduler vs simulator %s: %+.2f pp (target within 0.5: %s)\n", sim.Policy, d, mark(math.Abs(d) <= 0.5))
		}
	}
	for _, x := range r.Replayed {
		if x.Config != GPUAdmit {
			fmt.Fprintf(w, "- gpuadmit-scheduler vs %s: %+.2f pp (target below: %s)\n", x.Config, got-x.At(1).UnallocatedPct, mark(got < x.At(1).UnallocatedPct))
		}
	}
	// The target is per pod: GPUAdmit's PreScore scores every node (Score
	// looks the score up), and the plugin records it every cycle.
	where := "the scheduler sharing every CPU"
	if r.Settings.SchedulerCPUs != "" {
		where = "the scheduler by itself on CPU " + r.Settings.SchedulerCPUs
	}
	for _, t := range g.Timings {
		if t.Metric == placementMetric {
			fmt.Fprintf(w, "- %s p99 %.3f ms over %.0f samples, %s (target under 1 ms: %s)\n", t.Metric, t.P99Ms, t.Samples, where, mark(t.P99Ms < 1))
		}
	}
}

func mark(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

// WriteFiles writes results.json, usage.csv, usage.png (when the report
// has a usage trace), summary.csv and summary.md into dir.
func (r *Report) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := r.writeUsageCSV(filepath.Join(dir, "usage.csv")); err != nil {
		return err
	}
	if err := r.writeSummaryCSV(filepath.Join(dir, "summary.csv")); err != nil {
		return err
	}
	if r.hasUsage() {
		if err := r.writeUsagePlot(filepath.Join(dir, "usage.png")); err != nil {
			return err
		}
	}
	f, err := os.Create(filepath.Join(dir, "summary.md"))
	if err != nil {
		return err
	}
	r.Markdown(f)
	return f.Close()
}
