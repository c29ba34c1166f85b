package admission

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"
)

// serverMetric is one histogram a webhook server keeps of its own.
type serverMetric struct {
	source string // the configuration whose server keeps it
	name   string
	match  map[string]string
}

// serverMetrics are, by configuration, the histograms its server keeps, read
// from its own process's /metrics: gpuadmit's review and policy evaluation
// time, controller-runtime's handler latency (a native histogram, about 10%
// resolution) for gpuadmit and the no-op webhook alike, and OPA's request
// duration for the v0 data API.
var serverMetrics = map[string][]serverMetric{
	Gpuadmit: {
		{Gpuadmit, "gpuadmit_webhook_review_duration_seconds", map[string]string{"webhook": "mutate"}},
		{Gpuadmit, "gpuadmit_policy_evaluation_duration_seconds", nil},
		{Gpuadmit, "controller_runtime_webhook_latency_seconds", map[string]string{"webhook": "/mutate-v1-pod"}},
	},
	Noop:   {{Noop, "controller_runtime_webhook_latency_seconds", map[string]string{"webhook": NoopPath}}},
	Patch:  {{Patch, "controller_runtime_webhook_latency_seconds", map[string]string{"webhook": PatchPath}}},
	Replay: {{Replay, "controller_runtime_webhook_latency_seconds", map[string]string{"webhook": ReplayPath}}},
	OPA:    {{OPA, "http_request_duration_seconds", map[string]string{"handler": "v0/data"}}},
}

// memoLookups is gpuadmit's count of decision memo lookups, by result (hit, miss).
const memoLookups = "gpuadmit_decision_memo_lookups_total"

func (m serverMetric) String() string {
	s := m.name
	for k, v := range m.match {
		s += fmt.Sprintf("{%s=%q}", k, v)
	}
	return s
}

// snapshot is one reading of every metric source: the API server's, and
// each webhook server's by configuration.
type snapshot struct {
	apiserver families
	servers   map[string]families
}

// webhookCounts are the API server's rejections of pods by a webhook
// (error_type no_error) and its failures to call it (every other error_type).
type webhookCounts struct{ rejections, errors float64 }

type scraper struct {
	cs kubernetes.Interface
	// servers read each webhook server's metrics, by configuration.
	servers map[string]func(context.Context) (families, error)
}

func (s scraper) apiserver(ctx context.Context) (families, error) {
	raw, err := s.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the API server's /metrics: %w", err)
	}
	return parseText(raw)
}

func (s scraper) snapshot(ctx context.Context) (snapshot, error) {
	var snap snapshot
	var err error
	if snap.apiserver, err = s.apiserver(ctx); err != nil {
		return snap, err
	}
	snap.servers = map[string]families{}
	for config, read := range s.servers {
		if snap.servers[config], err = read(ctx); err != nil {
			return snap, fmt.Errorf("read %s's metrics: %w", config, err)
		}
	}
	return snap, nil
}

// calls is the API server's count of admit calls to the named webhook.
func (s scraper) calls(ctx context.Context, name string) (float64, error) {
	f, err := s.apiserver(ctx)
	if err != nil {
		return 0, err
	}
	return f.histogram(admissionDuration, map[string]string{"name": name, "type": "admit"}).Count, nil
}

const admissionDuration = "apiserver_admission_webhook_admission_duration_seconds"

// webhookHistogram is the API server's admission duration for the webhook.
func (s snapshot) webhookHistogram(name string) Histogram {
	return s.apiserver.histogram(admissionDuration, map[string]string{"name": name, "type": "admit"})
}

func (s snapshot) counts(name string) webhookCounts {
	const rejections = "apiserver_admission_webhook_rejection_count"
	match := map[string]string{"name": name}
	total := s.apiserver.counter(rejections, match, "", "")
	errs := s.apiserver.counter(rejections, match, "error_type", "no_error")
	return webhookCounts{rejections: total - errs, errors: errs}
}

func (s snapshot) server(m serverMetric) Histogram {
	return s.servers[m.source].histogram(m.name, m.match)
}

// memo is gpuadmit's decision memo lookups so far.
func (s snapshot) memo() MemoLookups {
	f := s.servers[Gpuadmit]
	return MemoLookups{
		Hits:   f.counter(memoLookups, map[string]string{"result": "hit"}, "", ""),
		Misses: f.counter(memoLookups, map[string]string{"result": "miss"}, "", ""),
	}
}

// posts counts the API server's POST requests by resource (pods, events, …).
func (s snapshot) posts() map[string]float64 {
	out := map[string]float64{}
	for _, m := range s.apiserver.matching("apiserver_request_total", map[string]string{"verb": "POST"}) {
		out[labelValue(m, "resource")] += m.GetCounter().GetValue()
	}
	return out
}

// addDelta adds what happened between two snapshots to the result.
func (r *Result) addDelta(before, after snapshot) {
	if r.posts == nil {
		r.posts = map[string]float64{}
	}
	was := before.posts()
	for res, n := range after.posts() {
		if d := n - was[res]; d > 0 {
			r.posts[res] += d
		}
	}
	name := webhookNames[r.Config]
	if name == "" {
		return
	}
	r.apiserver = r.apiserver.Add(after.webhookHistogram(name).Sub(before.webhookHistogram(name)))
	a, b := after.counts(name), before.counts(name)
	r.calls.rejections += a.rejections - b.rejections
	r.calls.errors += a.errors - b.errors
	if r.server == nil {
		r.server = map[string]Histogram{}
	}
	for _, m := range serverMetrics[r.Config] {
		r.server[m.String()] = r.server[m.String()].Add(after.server(m).Sub(before.server(m)))
	}
	if r.Config == Gpuadmit {
		a, b := after.memo(), before.memo()
		r.memo.Hits += a.Hits - b.Hits
		r.memo.Misses += a.Misses - b.Misses
	}
}
