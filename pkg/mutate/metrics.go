package mutate

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Review outcomes, the values of the outcome label.
const (
	OutcomeAllowed = "allowed" // admitted unchanged
	OutcomeMutated = "mutated" // admitted with a patch
	OutcomeDenied  = "denied"  // a policy or validation "no"
	OutcomeErrored = "errored" // gpuadmit failed: bad review, evaluation error
)

var (
	reviews = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gpuadmit_webhook_reviews_total",
		Help: "Admission reviews by webhook (mutate) and outcome (allowed, mutated, denied, errored).",
	}, []string{"webhook", "outcome"})
	reviewDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gpuadmit_webhook_review_duration_seconds",
		Help:    "Time to answer one admission review, decoding to response.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		// A native histogram beside the classic buckets (as
		// controller-runtime's webhook latency has), for quantiles within
		// 10% where the classic buckets only bound them (1 to 2.5 ms).
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  100,
		NativeHistogramMinResetDuration: time.Hour,
	}, []string{"webhook"})
)

func init() { metrics.Registry.MustRegister(reviews, reviewDuration) }
