package admission

import (
	"encoding/json"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Report is one benchmark run, as results.json holds it. Durations are in
// milliseconds; a bucket bound of -1 means past the histogram's last bucket.
type Report struct {
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Machine  Machine   `json:"machine"`
	Versions Versions  `json:"versions"`
	Settings Settings  `json:"settings"`
	// Equivalence compares gpuadmit's and OPA's mutation of every pod shape (dry-run creates).
	Equivalence []Equivalence `json:"equivalence"`
	// Replay is the patch the replay configuration answered with.
	Replay  *ReplayPatch `json:"replay,omitempty"`
	Results []Result     `json:"results"`
}

// Machine is where the run happened, and how loaded it was.
type Machine struct {
	CPU        string `json:"cpu"`
	Cores      int    `json:"cores"`
	MemoryGiB  int    `json:"memoryGiB"`
	Kernel     string `json:"kernel"`
	LoadBefore string `json:"loadBefore"` // /proc/loadavg
	LoadAfter  string `json:"loadAfter"`
}

// Versions of what ran.
type Versions struct {
	Go                string `json:"go"`
	Kubernetes        string `json:"kubernetes"`
	Etcd              string `json:"etcd"`
	ControllerRuntime string `json:"controllerRuntime"`
	OPA               string `json:"opa"`
}

// Settings are the run's options, and the order configurations ran in.
type Settings struct {
	Levels       []int    `json:"levels"`
	PodsPerLevel int      `json:"podsPerLevel"`
	Rounds       int      `json:"rounds"`
	Nodes        int      `json:"nodes"`
	Configs      []string `json:"configs"`
	PodShapes    int      `json:"podShapes"`
	Mix          Mix      `json:"mix"`       // shapes (PodShapes in turn), template (all alike), distinct (none alike to the policy)
	PodEvents    bool     `json:"podEvents"` // gpuadmit recorded a GPUAdmitted Event per admitted pod (--pod-events)
	Sequence     []string `json:"sequence"`  // "level/round/config", in the order they ran
}

// Equivalence is one pod shape under gpuadmit and under OPA.
type Equivalence struct {
	Pod      string   `json:"pod"`
	Gpuadmit Mutation `json:"gpuadmit"`
	OPA      Mutation `json:"opa"`
	Diff     string   `json:"diff,omitempty"`
}

// Result is one configuration at one level of concurrency, over all its rounds.
type Result struct {
	Config     string   `json:"config"`
	Level      int      `json:"level"`
	Pods       int      `json:"pods"`
	Errors     int      `json:"errors"`
	ErrorLines []string `json:"errorSamples,omitempty"`
	// Mutated counts created pods that came back with gpuadmit.io/decision.
	Mutated    int     `json:"mutated"`
	Seconds    float64 `json:"seconds"`
	Throughput float64 `json:"throughput"` // pods per second, all rounds
	Latency    Latency `json:"latency"`
	Rounds     []Round `json:"rounds"`
	// APIServer is apiserver_admission_webhook_admission_duration_seconds for the configuration's webhook.
	APIServer *WebhookLatency `json:"apiserver,omitempty"`
	// Server are the webhook server's own histograms.
	Server []ServerLatency `json:"server,omitempty"`
	// Memo is gpuadmit's decision memo over the measured rounds (gpuadmit only).
	Memo *MemoLookups `json:"memo,omitempty"`
	// CPU is where the machine's CPU time went while the rounds ran.
	CPU CPUUse `json:"cpu"`
	// PostsPerPod are the API server's POST requests per created pod by
	// resource: the pods, and the Events a webhook records.
	PostsPerPod map[string]float64 `json:"apiserverPostsPerPod"`

	samples   []time.Duration
	apiserver Histogram
	server    map[string]Histogram
	calls     webhookCounts
	posts     map[string]float64
	memo      MemoLookups
}

// MemoLookups are gpuadmit_decision_memo_lookups_total by result: policy
// answers reused for a pod that looked, to the policy, like one decided
// before (hits), and policy evaluations (misses).
type MemoLookups struct {
	Hits   float64 `json:"hits"`
	Misses float64 `json:"misses"`
}

// Latency is the client's end-to-end Create latency.
type Latency struct {
	MeanMs float64 `json:"meanMs"`
	P50Ms  float64 `json:"p50Ms"`
	P90Ms  float64 `json:"p90Ms"`
	P95Ms  float64 `json:"p95Ms"`
	P99Ms  float64 `json:"p99Ms"`
	P999Ms float64 `json:"p999Ms"`
	MaxMs  float64 `json:"maxMs"`
	// Percentiles are p1, p2, … p100 (p100 is the maximum).
	Percentiles []float64 `json:"percentiles"`
}

// Round is one round of a result.
type Round struct {
	Round      int     `json:"round"`
	Pods       int     `json:"pods"`
	Errors     int     `json:"errors"`
	Seconds    float64 `json:"seconds"`
	Throughput float64 `json:"throughput"`
	P50Ms      float64 `json:"p50Ms"`
	P99Ms      float64 `json:"p99Ms"`
	Load       string  `json:"load"` // /proc/loadavg after the round
	// CPUMsPerPod is the round's CPU milliseconds per created pod by
	// process, as CPUUse.MsPerPod; CPUTotalMsPerPod is their sum.
	CPUMsPerPod      map[string]float64 `json:"cpuMsPerPod,omitempty"`
	CPUTotalMsPerPod float64            `json:"cpuTotalMsPerPod,omitempty"`
}

// WebhookLatency is the API server's view of one webhook: calls, the mean,
// and the bucket bounds (0.005, 0.025, 0.1, 0.5, 1 … s) holding p50/p95/p99.
type WebhookLatency struct {
	Name          string  `json:"name"`
	Calls         float64 `json:"calls"`
	CallsPerPod   float64 `json:"callsPerPod"`
	MeanMs        float64 `json:"meanMs"`
	P50LeMs       float64 `json:"p50LeMs"`
	P95LeMs       float64 `json:"p95LeMs"`
	P99LeMs       float64 `json:"p99LeMs"`
	Rejections    float64 `json:"rejections"`    // the webhook said no
	WebhookErrors float64 `json:"webhookErrors"` // calling it failed
}

// ServerLatency is a histogram of the webhook server's own, in milliseconds:
// the bucket bounds holding p50/p95/p99 and, for classic buckets, Prometheus'
// histogram_quantile interpolation within them.
type ServerLatency struct {
	Metric   string  `json:"metric"`
	Buckets  string  `json:"buckets"` // classic or native
	Count    float64 `json:"count"`
	MeanMs   float64 `json:"meanMs"`
	P50LeMs  float64 `json:"p50LeMs"`
	P95LeMs  float64 `json:"p95LeMs"`
	P99LeMs  float64 `json:"p99LeMs"`
	P50EstMs float64 `json:"p50EstMs,omitempty"`
	P99EstMs float64 `json:"p99EstMs,omitempty"`
}

// summarise fills the result's reported fields from what its rounds gathered.
func (r *Result) summarise() {
	r.Latency = latencyOf(r.samples)
	r.CPU.summarise(r.Pods)
	r.PostsPerPod = map[string]float64{}
	for res, n := range r.posts {
		r.PostsPerPod[res] = round2(n / float64(max(r.Pods, 1)))
	}
	if r.Seconds > 0 {
		r.Throughput = float64(len(r.samples)) / r.Seconds
	}
	if name := webhookNames[r.Config]; name != "" {
		h := r.apiserver
		r.APIServer = &WebhookLatency{
			Name: name, Calls: h.Count, CallsPerPod: h.Count / float64(max(r.Pods, 1)),
			MeanMs: ms(h.Sum / math.Max(h.Count, 1)), P50LeMs: ms(h.Bound(.5)), P95LeMs: ms(h.Bound(.95)), P99LeMs: ms(h.Bound(.99)),
			Rejections: r.calls.rejections, WebhookErrors: r.calls.errors,
		}
	}
	if r.Config == Gpuadmit {
		m := r.memo
		r.Memo = &m
	}
	r.Server = nil
	for _, metric := range slices.Sorted(maps.Keys(r.server)) {
		r.Server = append(r.Server, serverLatency(metric, r.server[metric]))
	}
}

func serverLatency(metric string, h Histogram) ServerLatency {
	s := ServerLatency{Metric: metric, Count: h.Count, MeanMs: ms(h.Sum / math.Max(h.Count, 1))}
	if len(h.Native) > 0 {
		s.Buckets = "native"
		s.P50LeMs, s.P95LeMs, s.P99LeMs = ms(h.NativeBound(.5)), ms(h.NativeBound(.95)), ms(h.NativeBound(.99))
		return s
	}
	s.Buckets = "classic"
	s.P50LeMs, s.P95LeMs, s.P99LeMs = ms(h.Bound(.5)), ms(h.Bound(.95)), ms(h.Bound(.99))
	s.P50EstMs, s.P99EstMs = ms(h.Interpolated(.5)), ms(h.Interpolated(.99))
	return s
}

// ms converts seconds to milliseconds for JSON: NaN (no data) becomes 0 and +Inf -1.
func ms(seconds float64) float64 {
	switch {
	case math.IsNaN(seconds):
		return 0
	case math.IsInf(seconds, 1):
		return -1
	}
	return seconds * 1000
}

func latencyOf(samples []time.Duration) Latency {
	if len(samples) == 0 {
		return Latency{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	l := Latency{
		MeanMs: msOf(sum / time.Duration(len(s))),
		P50Ms:  msOf(percentile(s, 50)), P90Ms: msOf(percentile(s, 90)), P95Ms: msOf(percentile(s, 95)),
		P99Ms: msOf(percentile(s, 99)), P999Ms: msOf(percentile(s, 99.9)), MaxMs: msOf(s[len(s)-1]),
	}
	for p := 1; p <= 100; p++ {
		l.Percentiles = append(l.Percentiles, msOf(percentile(s, float64(p))))
	}
	return l
}

// percentile is the nearest-rank percentile of sorted samples.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

func msOf(d time.Duration) float64 { return math.Round(float64(d.Microseconds())) / 1000 }

// WriteFiles writes results.json and latency.png into dir.
func (r *Report) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return r.WritePlot(filepath.Join(dir, "latency.png"))
}
