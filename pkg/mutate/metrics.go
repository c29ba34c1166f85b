package mutate

import (
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
	}, []string{"webhook"})
)

func init() { metrics.Registry.MustRegister(reviews, reviewDuration) }
