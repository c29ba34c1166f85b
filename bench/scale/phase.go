package scale

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/gpuadmit/gpuadmit/bench/admission"
	"github.com/gpuadmit/gpuadmit/bench/agents"
)

// The webhook's metrics a phase reads.
const (
	metricReview         = "gpuadmit_webhook_review_duration_seconds"
	metricMemo           = "gpuadmit_decision_memo_lookups_total"
	metricRebuilds       = "gpuadmit_inventory_rebuilds_total"
	metricRebuildSeconds = "gpuadmit_inventory_rebuild_duration_seconds"
	metricCacheObjects   = "gpuadmit_cache_objects"
)

// phase creates opts.Pods pods of the mix, with churn running (from
// ChurnWarmup before the first pod) or not, between two scrapes of the
// webhook's metrics.
func (b *bench) phase(ctx context.Context, nodes int, mix admission.Mix, churn bool) (Phase, error) {
	p := Phase{Mix: string(mix), Churn: churn}
	var ch *churner
	if churn {
		names := make([]string, nodes)
		for i := range names {
			names[i] = b.fleet[i].node.Name
		}
		ch = newChurner(b.cs, names, b.opts.ChurnPeriod)
		cctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { ch.run(cctx); close(done) }()
		defer func() { stop(); <-done }()
		select {
		case <-ctx.Done():
			return p, ctx.Err()
		case <-time.After(b.opts.ChurnWarmup):
		}
	}
	before, err := admission.ScrapeMetrics(ctx, b.proc.metrics)
	if err != nil {
		return p, err
	}
	cpu0, err := b.cpu()
	if err != nil {
		return p, err
	}
	var writes0 int64
	if ch != nil {
		writes0 = ch.writes.Load()
	}
	prefix := fmt.Sprintf("s%d-%s-%s", nodes, mix, map[bool]string{false: "quiet", true: "churn"}[churn])
	out := admission.Load{Namespace: Namespace, Prefix: prefix, Mix: mix, First: b.pods, Pods: b.opts.Pods, Clients: b.clients}.Run(ctx)
	created := len(out.Latencies)
	cpu1, err := b.cpu()
	if err != nil {
		return p, err
	}
	after, err := admission.ScrapeMetrics(ctx, b.proc.metrics)
	if err != nil {
		return p, err
	}
	b.pods += created
	p.WebhookCPUSeconds, p.APIServerCPUSeconds = cpu1[0]-cpu0[0], cpu1[1]-cpu0[1]
	p.Pods, p.Errors, p.Seconds = created, len(out.Errors), out.Wall.Seconds()
	if len(out.Errors) > 0 {
		p.FirstError = out.Errors[0]
	}
	p.PodsPerSecond = float64(created) / out.Wall.Seconds()
	p.Load = loadavg()
	p.delta(before, after)
	if ch != nil {
		p.LabelWrites = ch.writes.Load() - writes0
		p.LabelWritesPerSecond = float64(p.LabelWrites) / out.Wall.Seconds()
		p.LabelErrors = ch.errors.Load()
		if e, ok := ch.lastErr.Load().(string); ok {
			p.LabelError = e
		}
	}
	b.progress("%d nodes, %s, churn %v: %d pods (%d errors) at %.0f/s; review p50 %.2f ms p99 %.2f ms; memo %.0f/%.0f hits; rebuilds %v; label writes %d (%.1f/s); load %s",
		nodes, mix, churn, p.Pods, p.Errors, p.PodsPerSecond, p.ReviewP50Ms, p.ReviewP99Ms, p.MemoHits, p.MemoHits+p.MemoMisses, p.Rebuilds, p.LabelWrites, p.LabelWritesPerSecond, p.Load)
	return p, nil
}

// cpu reads the user+system CPU seconds of gpuadmit's webhook and of kube-apiserver.
func (b *bench) cpu() ([2]float64, error) {
	var out [2]float64
	for i, pid := range []int{b.proc.pid, b.apiserver} {
		v, err := agents.ProcessCPU(pid)
		if err != nil {
			return out, err
		}
		out[i] = v
	}
	return out, nil
}

// delta reads what the webhook counted between two scrapes.
func (p *Phase) delta(before, after admission.Metrics) {
	match := map[string]string{"webhook": "mutate"}
	h := after.Histogram(metricReview, match).Sub(before.Histogram(metricReview, match))
	p.Reviews = h.Count
	p.ReviewP50Ms, p.ReviewP99Ms = quantileMs(h, 0.5), quantileMs(h, 0.99)
	if h.Count > 0 {
		p.ReviewMeanMs = 1000 * h.Sum / h.Count
	}
	p.MemoHits = after.Value(metricMemo, map[string]string{"result": "hit"}) - before.Value(metricMemo, map[string]string{"result": "hit"})
	p.MemoMisses = after.Value(metricMemo, map[string]string{"result": "miss"}) - before.Value(metricMemo, map[string]string{"result": "miss"})
	p.Rebuilds = map[string]float64{}
	was := before.By(metricRebuilds, "trigger")
	for trigger, n := range after.By(metricRebuilds, "trigger") {
		if d := n - was[trigger]; d > 0 {
			p.Rebuilds[trigger] = d
		}
	}
	rh := after.Histogram(metricRebuildSeconds, nil).Sub(before.Histogram(metricRebuildSeconds, nil))
	if rh.Count > 0 {
		p.RebuildMeanMs = 1000 * rh.Sum / rh.Count
	}
}

// quantileMs is the q-quantile in milliseconds: the upper bound of the
// native bucket that holds it (within 10%), else interpolated in the
// classic buckets.
func quantileMs(h admission.Histogram, q float64) float64 {
	if h.Count == 0 {
		return 0
	}
	if v := h.NativeBound(q); !math.IsNaN(v) {
		return 1000 * v
	}
	return 1000 * h.Interpolated(q)
}
