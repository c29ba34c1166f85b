package placement

import (
	"slices"
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// placementDuration is GPUAdmit's placement time per pod, every cycle: its
// PreScore, which scores every feasible node. The scheduler's own
// scheduler_plugin_execution_duration_seconds samples 10% of cycles into a
// buffer that Filter's per-node observations fill first, so it holds few
// PreScore samples; this one holds all.
var placementDuration = metrics.NewHistogram(&metrics.HistogramOpts{
	Namespace:      "gpuadmit",
	Subsystem:      "scheduler",
	Name:           "placement_duration_seconds",
	Help:           "Time GPUAdmit takes to score every feasible node for one pod (its PreScore), every scheduling cycle.",
	Buckets:        placementBuckets(),
	StabilityLevel: metrics.ALPHA,
})

// placementBuckets are 10 µs × 1.5ᵏ, to about 1.3 s, and 1 ms, the
// placement time's p99 target: the share of cycles over the target is then
// counted, not interpolated in the 0.86–1.30 ms bucket.
func placementBuckets() []float64 {
	b := append(metrics.ExponentialBuckets(0.00001, 1.5, 30), placementTarget)
	slices.Sort(b)
	return b
}

// placementTarget is the placement time per pod the plugin is held to at
// the 99th percentile, in seconds (docs/benchmarks.md, section 6).
const placementTarget = 0.001

// scoresComputed is how many nodes' scores a cycle computed afresh: the
// nodes that changed since the last cycle, those a request is new to, and
// the stale scores it refreshed (at most refreshAtMost); nodes alike to
// one computed take its score and are not counted. With placementDuration
// it tells a cycle that worked from one that waited for a core.
var scoresComputed = metrics.NewHistogram(&metrics.HistogramOpts{
	Namespace:      "gpuadmit",
	Subsystem:      "scheduler",
	Name:           "placement_scores_computed",
	Help:           "Nodes whose score GPUAdmit computed afresh in one scheduling cycle (changed nodes, a new request, stale scores refreshed).",
	Buckets:        []float64{0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096},
	StabilityLevel: metrics.ALPHA,
})

// scoreSets counts the placer sets made, by cause: a new revision of the
// target workload, which makes every kept score stale, or new scarcity
// prices under the same one, which kept scores pay as they are.
var scoreSets = metrics.NewCounterVec(&metrics.CounterOpts{
	Namespace:      "gpuadmit",
	Subsystem:      "scheduler",
	Name:           "placement_score_sets_total",
	Help:           "Score sets GPUAdmit made, by cause: workload (a new revision of the target workload, which makes every kept node score stale) or prices (new scarcity prices under the same revision, which kept scores pay as they are).",
	StabilityLevel: metrics.ALPHA,
}, []string{"cause"})

// revisionDuration is the wall time a revision of the derived workload
// took to make off the scheduling cycle (workload.reviseAsync): its pods
// counted and sorted, its placer set and prices made, and the kept views'
// bases made under it (nodeStates.warm), which yields to other goroutines
// between pieces, so that with one core the time holds the cycles and
// informers that ran meanwhile. None of it is placement time.
var revisionDuration = metrics.NewHistogram(&metrics.HistogramOpts{
	Namespace:      "gpuadmit",
	Subsystem:      "scheduler",
	Name:           "workload_revision_duration_seconds",
	Help:           "Wall time GPUAdmit took to make a revision of its derived target workload off the scheduling cycle (kinds sorted, placer set and scarcity prices made, kept node views' fragmentation computed under it, yielding to other goroutines between pieces).",
	Buckets:        placementBuckets(),
	StabilityLevel: metrics.ALPHA,
})

var registerOnce sync.Once

// registerMetrics adds the plugin's metrics to the scheduler's registry,
// which its /metrics serves.
func registerMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(placementDuration, scoresComputed, scoreSets, revisionDuration) })
}
