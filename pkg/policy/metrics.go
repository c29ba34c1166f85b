package policy

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics of the policy engine, registered in controller-runtime's registry.
var (
	evalDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "gpuadmit_policy_evaluation_duration_seconds",
		Help:    "Time to evaluate data.gpuadmit.decision for one pod.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		// A native histogram too, as gpuadmit_webhook_review_duration_seconds.
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  100,
		NativeHistogramMinResetDuration: time.Hour,
	})
	evalErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gpuadmit_policy_evaluation_errors_total",
		Help: "Evaluations that failed or ran past their time budget.",
	})
	loadFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gpuadmit_policy_load_failures_total",
		Help: "Policy sets that failed to load, compile or pass their tests and were not activated.",
	})
	activeRevision = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gpuadmit_policy_active_revision",
		Help: "1 for the policy revision this replica decides with.",
	}, []string{"revision"})
)

func init() {
	metrics.Registry.MustRegister(evalDuration, evalErrors, loadFailures, activeRevision)
}

func setActiveRevision(rev string) {
	activeRevision.Reset()
	activeRevision.WithLabelValues(rev).Set(1)
}
