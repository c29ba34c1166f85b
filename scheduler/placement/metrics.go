package placement

import (
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
	Buckets:        metrics.ExponentialBuckets(0.00001, 1.5, 30), // 10 µs to about 1.3 s
	StabilityLevel: metrics.ALPHA,
})

var registerOnce sync.Once

// registerMetrics adds the plugin's metrics to the scheduler's registry,
// which its /metrics serves.
func registerMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(placementDuration) })
}
