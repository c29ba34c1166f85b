package scale

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gpuadmit/gpuadmit/policies"
)

// Report is one run.
type Report struct {
	Started, Finished time.Time
	Machine           Machine
	Settings          Settings
	Steps             []Step
	// Fill are the readings after each chunk of Options.Fill.
	Fill []FillPoint `json:",omitempty"`
}

// FillPoint is the webhook's memory after one chunk of fill pods.
type FillPoint struct {
	Nodes, Pods, Errors int
	FirstError          string `json:",omitempty"`
	PodsPerSecond       float64
	Memory              Memory
}

// Settings are the run's options as they took effect.
type Settings struct {
	Steps                 []int
	PodsPerPhase, Clients int
	ChurnPeriodSeconds    float64
	ChurnWarmupSeconds    float64
	DRAEvery, Probes      int
	PolicyBytes           int64
	// WebhookMemoryLimit is the memory limit in bytes the webhook's
	// process was given (its GPUADMIT_MEMORY_LIMIT), as read from the
	// process's environment.
	WebhookMemoryLimit int64
}

func settingsOf(o Options) Settings {
	return Settings{Steps: o.Steps, PodsPerPhase: o.Pods, Clients: o.Clients, ChurnPeriodSeconds: o.ChurnPeriod.Seconds(),
		ChurnWarmupSeconds: o.ChurnWarmup.Seconds(), DRAEvery: o.DRAEvery, Probes: o.Probes, PolicyBytes: policyBytes()}
}

// Step is one number of nodes.
type Step struct {
	Nodes, DRANodes, Slices int
	// AddSeconds is how long adding this step's nodes took.
	AddSeconds float64
	// AfterNodes is the webhook's memory once the nodes were in, before
	// this step's pods; AfterPods after them.
	AfterNodes, AfterPods Memory
	// Rebuild is the inventory rebuilds the taint probe caused.
	Rebuild Rebuild
	Phases  []Phase
	// WarmupErrors are the warm-up's dry-run pods that failed.
	WarmupErrors int
	// ChurnedNodes is how many nodes carried a rewritten GFD timestamp
	// after the last churn phase.
	ChurnedNodes int
	Err          string `json:",omitempty"`
}

// Memory is one reading of the webhook process.
type Memory struct {
	// RSSMB and PeakRSSMB are VmRSS and VmHWM (the largest RSS so far), MB.
	RSSMB, PeakRSSMB float64
	// HeapMB is the Go heap's live bytes after a forced collection
	// (HeapAlloc), HeapInuseMB its spans in use, SysMB all the runtime holds.
	HeapMB, HeapInuseMB, SysMB float64
	// Cache is gpuadmit_cache_objects by kind.
	Cache map[string]float64
	// Formula is docs/scale.md's formula at the cached nodes, DRA nodes
	// (ResourceSlices: the agent publishes one per node) and GPU pods.
	Formula Formula
}

// Formula is docs/scale.md's memory formula at some nodes, DRA nodes and
// GPU pods.
type Formula struct {
	HeapMB, RSSTypicalMB, RSSPeakMB float64
}

// The formula's terms (docs/scale.md), in bytes. The heap per object is
// the pkg/webhook heap benchmarks': a GPU node as it is held once it has
// been updated (BenchmarkHeapPerNode/updated: the cache holds the new
// object, the inventory the labels it was built from), what a DRA node of
// 24 devices adds (BenchmarkHeapPerDRANode/updated less that), a GPU pod
// (BenchmarkHeapPerGPUPod), a byte of policy source. The resident memory
// is the larger of two lines fitted to the heap and RSS gpuadmit-bench
// scale measured (29 readings, heaps of 29 to 814 MB): a fixed part and
// 2.15 × heap where the heap is small, and 2.7 × heap above about 90 MB
// of heap, where the collector's goal (twice the live heap), the spans
// that heap is spread over and what the scavenger keeps dominate. Its
// peak is the highest reading, 10.3% above it (11%).
const (
	heapFixed, heapPerPolicyByte         = 7e6, 62
	heapPerNode, heapPerDRANode, heapPod = 22.2e3, 6.1e3, 5.35e3
	rssBase, rssPerHeap, rssPerLargeHeap = 48e6, 2.15, 2.7
	rssPeak                              = 1.11
	// heapPerDRANodeController is what a DRA node adds in the controller,
	// which keeps each device's UUIDs for the usage report, so its devices
	// share no attribute map (BenchmarkHeapPerDRANode/controller/updated
	// less BenchmarkHeapPerNode/updated).
	heapPerDRANodeController = 41.1e3
)

// formulaOf is the formula for a serving replica (the process this
// benchmark measures) at nodes GPU nodes, draNodes of them gpuadmit's DRA
// driver's, and pods GPU pods, with the default policy set.
func formulaOf(nodes, draNodes, pods float64) Formula {
	return formula(nodes, draNodes, pods, heapPerDRANode)
}

// controllerFormulaOf is the formula for the controller's leader, which
// deploy/base and the chart size by it.
func controllerFormulaOf(nodes, draNodes, pods float64) Formula {
	return formula(nodes, draNodes, pods, heapPerDRANodeController)
}

func formula(nodes, draNodes, pods, perDRANode float64) Formula {
	heap := heapFixed + heapPerNode*nodes + perDRANode*draNodes + heapPod*pods + heapPerPolicyByte*float64(policyBytes())
	typical := max(rssBase+rssPerHeap*heap, rssPerLargeHeap*heap)
	return Formula{HeapMB: heap / 1e6, RSSTypicalMB: typical / 1e6, RSSPeakMB: rssPeak * typical / 1e6}
}

// policyBytes is the size of the default policy set's source, which the
// webhook runs here.
func policyBytes() int64 {
	var size int64
	_ = fs.WalkDir(policies.FS, ".", func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				size += info.Size()
			}
		}
		return nil
	})
	return size
}

// Rebuild is what the rebuild probe's changes cost.
type Rebuild struct {
	// Changes is how many taint changes were made; Count the rebuilds
	// the webhook counted meanwhile.
	Changes int
	Count   float64
	// MeanMs is their mean duration; MaxBucketMs the upper bound of the
	// histogram bucket holding the longest (buckets double from 1 ms).
	MeanMs, MaxBucketMs float64
}

// Phase is one phase of a step: pods of one mix, with or without churn.
type Phase struct {
	Mix   string
	Churn bool
	// Pods were created, Errors failed, in Seconds, as the clients saw.
	Pods, Errors  int
	FirstError    string `json:",omitempty"`
	Seconds       float64
	PodsPerSecond float64
	// Reviews, ReviewP50Ms, ReviewP99Ms, ReviewMeanMs are the webhook's
	// own review duration over the phase (its native histogram: quantiles
	// are bucket bounds within 10%).
	Reviews                                float64
	ReviewP50Ms, ReviewP99Ms, ReviewMeanMs float64
	MemoHits, MemoMisses                   float64
	// Rebuilds are the inventory rebuilds in the phase by trigger;
	// RebuildMeanMs their mean duration.
	Rebuilds      map[string]float64
	RebuildMeanMs float64
	// LabelWrites are churn's label patches during the pods (after the
	// warm-up), LabelErrors its failed patches in the whole phase.
	LabelWrites          int64
	LabelWritesPerSecond float64
	LabelErrors          int64
	LabelError           string `json:",omitempty"`
	// WebhookCPUSeconds and APIServerCPUSeconds are the processes' user
	// and system CPU time over the pods (churn's label writes included).
	WebhookCPUSeconds, APIServerCPUSeconds float64
	Load                                   string
}

// HitRate is the memo's hits over its lookups, 0 without lookups.
func (p Phase) HitRate() float64 {
	if p.MemoHits+p.MemoMisses == 0 {
		return 0
	}
	return p.MemoHits / (p.MemoHits + p.MemoMisses)
}

// WriteFiles writes results.json and results.md into dir.
func (r *Report) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644); err != nil {
		return err
	}
	var md strings.Builder
	r.Markdown(&md)
	return os.WriteFile(filepath.Join(dir, "results.md"), []byte(md.String()), 0o644)
}

// Markdown writes the run's tables: memory against the formula, rebuilds,
// and the phases.
func (r *Report) Markdown(w io.Writer) {
	fmt.Fprintf(w, "gpuadmit-bench scale, %s to %s; %d CPUs, %s; load %s before, %s after\n\n",
		r.Started.Format(time.RFC3339), r.Finished.Format(time.RFC3339), r.Machine.CPUs, r.Machine.GoVersion, r.Machine.LoadBefore, r.Machine.LoadAfter)
	fmt.Fprintf(w, "The webhook's memory limit: %.0f MiB (its Go runtime's cap: 90%% of it).\n\n", float64(r.Settings.WebhookMemoryLimit)/(1<<20))
	fmt.Fprintln(w, "| nodes (DRA) | GPU pods cached | cache objects | RSS MB | peak RSS MB | heap MB (live) | formula: heap / RSS typical / RSS peak MB | RSS / formula typical |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, s := range r.Steps {
		for _, m := range []Memory{s.AfterNodes, s.AfterPods} {
			memoryRow(w, s.Nodes, s.DRANodes, m)
		}
	}
	for _, f := range r.Fill {
		memoryRow(w, f.Nodes, -1, f.Memory)
	}
	fmt.Fprintln(w, "\n| nodes | taint changes | rebuilds | rebuild mean ms | longest ≤ ms | nodes added in s |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- |")
	for _, s := range r.Steps {
		fmt.Fprintf(w, "| %d | %d | %.0f | %.1f | %.0f | %.0f |\n", s.Nodes, s.Rebuild.Changes, s.Rebuild.Count, s.Rebuild.MeanMs, s.Rebuild.MaxBucketMs, s.AddSeconds)
	}
	fmt.Fprintln(w, "\n| nodes | pods | churn: label writes/s | pods (errors) | pods/s | review p50 ms | review p99 ms | review mean ms | memo hit rate | rebuilds (per min) | gpuadmit CPU ms/s | API server CPU ms/s | load |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, s := range r.Steps {
		for _, p := range s.Phases {
			churn := "none"
			if p.Churn {
				churn = fmt.Sprintf("%.1f (%d failed)", p.LabelWritesPerSecond, p.LabelErrors)
			}
			fmt.Fprintf(w, "| %d | %s | %s | %d (%d) | %.0f | %.2f | %.2f | %.2f | %.4f | %s | %.0f | %.0f | %s |\n", s.Nodes, p.Mix, churn, p.Pods, p.Errors, p.PodsPerSecond,
				p.ReviewP50Ms, p.ReviewP99Ms, p.ReviewMeanMs, p.HitRate(), rebuildString(p), 1000*p.WebhookCPUSeconds/p.Seconds, 1000*p.APIServerCPUSeconds/p.Seconds, p.Load)
		}
	}
	for _, s := range r.Steps {
		if s.Err != "" {
			fmt.Fprintf(w, "\n%d nodes stopped: %s\n", s.Nodes, s.Err)
		}
	}
}

func memoryRow(w io.Writer, nodes, draNodes int, m Memory) {
	if m.Cache == nil {
		return
	}
	dra := "fill"
	if draNodes >= 0 {
		dra = fmt.Sprint(draNodes)
	}
	fmt.Fprintf(w, "| %d (%s) | %.0f | %s | %.0f | %.0f | %.0f | %.0f / %.0f / %.0f | %.2f |\n", nodes, dra, m.Cache["Pod"], cacheString(m.Cache),
		m.RSSMB, m.PeakRSSMB, m.HeapMB, m.Formula.HeapMB, m.Formula.RSSTypicalMB, m.Formula.RSSPeakMB, m.RSSMB/m.Formula.RSSTypicalMB)
}

func cacheString(c map[string]float64) string {
	parts := make([]string, 0, len(c))
	for _, k := range slices.Sorted(maps.Keys(c)) {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, c[k]))
	}
	return strings.Join(parts, ", ")
}

func rebuildString(p Phase) string {
	if len(p.Rebuilds) == 0 {
		return "0"
	}
	parts := make([]string, 0, len(p.Rebuilds))
	for _, k := range slices.Sorted(maps.Keys(p.Rebuilds)) {
		parts = append(parts, fmt.Sprintf("%s %.0f (%.1f/min)", k, p.Rebuilds[k], p.Rebuilds[k]/(p.Seconds/60)))
	}
	return strings.Join(parts, ", ")
}
