package replay

import (
	"context"
	"crypto/tls"
	"math"
	"net/http"
	"time"

	"github.com/gpuadmit/gpuadmit/bench/admission"
)

// Timing is one histogram of the scheduler's: how many observations it
// holds and its quantiles in milliseconds, both as the bucket bound below
// which they certainly lie and as histogram_quantile interpolates.
type Timing struct {
	Metric   string  `json:"metric"`
	Samples  float64 `json:"samples"`
	MeanMs   float64 `json:"meanMs"`
	P50Ms    float64 `json:"p50Ms"`
	P99Ms    float64 `json:"p99Ms"`
	P99Bound float64 `json:"p99BoundMs"` // +Inf past the last bucket, written as -1
}

// placementMetric labels GPUAdmit's placement time per pod, the
// histogram placementSeries.
const (
	placementMetric = "GPUAdmit placement (per pod, every cycle)"
	placementSeries = "gpuadmit_scheduler_placement_duration_seconds"
)

// revisionMetric labels the time GPUAdmit takes to revise its derived
// workload off the scheduling cycle (from cce9f5b): not placement time,
// but time the scheduler's cores spend between cycles or beside them.
const (
	revisionMetric = "GPUAdmit workload revision (off the cycle, wall time with yields, per revision)"
	revisionSeries = "gpuadmit_scheduler_workload_revision_duration_seconds"
)

// pluginPoints are GPUAdmit's extension points in a scheduling cycle.
var pluginPoints = []string{"PreFilter", "Filter", "PreScore", "Score", "ScoreExtensionNormalize"}

// cyclePoints are the scheduler's per-pod extension point durations
// (every plugin of the profile, every cycle: not sampled).
var cyclePoints = []string{"Filter", "PreScore", "Score"}

// scrape reads the scheduler's timings: GPUAdmit's placement time per
// pod (its own histogram, every cycle) and per extension point (sampled), and for every profile its per-pod Filter, PreScore and Score
// and the scheduling algorithm as a whole.
func (r *replay) scrape(ctx context.Context) ([]Timing, *Scoring, error) {
	text, err := admission.Get(ctx, insecure, r.metrics)
	if err != nil {
		return nil, nil, err
	}
	m, err := admission.ParseMetrics(text)
	if err != nil {
		return nil, nil, err
	}
	var out []Timing
	add := func(label, name string, match map[string]string) {
		if h := m.Histogram(name, match); h.Count > 0 {
			out = append(out, timingOf(label, h))
		}
	}
	if r.s.gpuadmit {
		add(placementMetric, placementSeries, nil)
		for _, p := range pluginPoints {
			add("GPUAdmit "+p+" (per call)", "scheduler_plugin_execution_duration_seconds",
				map[string]string{"plugin": "GPUAdmit", "extension_point": p})
		}
		add(revisionMetric, revisionSeries, nil)
	}
	for _, p := range cyclePoints {
		add(p+", all plugins (per pod)", "scheduler_framework_extension_point_duration_seconds",
			map[string]string{"extension_point": p, "profile": r.s.name})
	}
	add("scheduling algorithm (per pod)", "scheduler_scheduling_algorithm_duration_seconds", nil)
	var sc *Scoring
	if h := m.Histogram("gpuadmit_scheduler_placement_scores_computed", nil); r.s.gpuadmit && h.Count > 0 {
		sets := m.By("gpuadmit_scheduler_placement_score_sets_total", "cause")
		sc = &Scoring{Cycles: h.Count, ComputedMean: h.Sum / h.Count, ComputedP50: h.Interpolated(0.5),
			ComputedP99: h.Interpolated(0.99), SetsWorkload: sets["workload"], SetsPrices: sets["prices"], OverTarget: -1}
		if over, ok := m.Histogram(placementSeries, nil).Above(placementTarget); ok {
			sc.OverTarget = over
		}
	}
	return out, sc, nil
}

// Scoring is how much GPUAdmit's cycles computed: the nodes whose score a
// cycle computed afresh (quantiles interpolated in the histogram's
// buckets), and the score sets made by cause: a new workload revision
// makes every kept score stale, new prices do not. It tells a slow cycle
// that worked from one that waited.
type Scoring struct {
	Cycles       float64 `json:"cycles"`
	ComputedMean float64 `json:"computedMean"`
	ComputedP50  float64 `json:"computedP50"`
	ComputedP99  float64 `json:"computedP99"`
	SetsWorkload float64 `json:"setsWorkload"`
	SetsPrices   float64 `json:"setsPrices"`
	// OverTarget is how many cycles' placement took over placementTarget,
	// counted by the histogram's bucket at it (-1: a scheduler without
	// that bucket, before 54609e9): over 1% of Cycles, the p99 is over
	// the target, whatever the interpolation says.
	OverTarget float64 `json:"cyclesOverTarget"`
}

// placementTarget is the placement time per pod whose p99 is the target,
// in seconds: a bucket bound of placementSeries. A copy of
// scheduler/placement's placementTarget: the bench does not import the
// scheduler's module, which brings k8s.io/kubernetes.
const placementTarget = 0.001

func timingOf(label string, h admission.Histogram) Timing {
	t := Timing{Metric: label, Samples: h.Count, MeanMs: 1000 * h.Sum / h.Count,
		P50Ms: 1000 * h.Interpolated(0.5), P99Ms: 1000 * h.Interpolated(0.99), P99Bound: 1000 * h.Bound(0.99)}
	if math.IsInf(t.P99Bound, 1) {
		t.P99Bound = -1
	}
	return t
}

// insecure reads the scheduler's own serving certificate, self-signed.
var insecure = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a local component's self-signed certificate
}}
