package usage

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
)

// Source reads Compute's input from wherever the process keeps it (the
// leader's informer caches), at a scrape.
type Source interface {
	Input(ctx context.Context) (Input, error)
}

// DefaultMaxNamespaces is how many namespaces the series name one by one
// unless CollectorOptions says otherwise; the rest are summed under OtherNamespace.
const DefaultMaxNamespaces = 1000

// OtherNamespace is the namespace label of the namespaces past the bound,
// summed: sum() over namespaces stays right, only their names are dropped.
const OtherNamespace = "_other"

// CollectorOptions tune a Collector; the zero value works.
type CollectorOptions struct {
	// MaxNamespaces bounds the namespaces named in the series: those with
	// the most GPU memory allocated and pending keep their names, the rest
	// are summed under OtherNamespace. Zero means DefaultMaxNamespaces.
	MaxNamespaces int
	// Timeout bounds reading the source at one scrape; zero means 10s.
	Timeout time.Duration
	// MinInterval is how long one report serves scrapes before the next is
	// computed: a pair of Prometheus replicas (the usual HA setup) scrapes
	// twice per interval, and a report at 50,000 pods costs most of a
	// second of CPU. Zero means 10s; a negative value computes at every scrape.
	MinInterval time.Duration
	// Clock is the time source; nil means the real clock.
	Clock clock.PassiveClock
}

// Collector exports a Report as Prometheus series, but only while its
// process leads: the reconcilers' leader runs it (Start), so exactly one
// replica exports these series, sum() over replicas counts nothing twice,
// and a replica that lost the lead (or never had it) exports none, not
// stale ones. It computes the report at a scrape at most every
// MinInterval, and serves the last one in between.
type Collector struct {
	source  Source
	opts    CollectorOptions
	log     logr.Logger
	clock   clock.PassiveClock
	leading atomic.Bool

	mu   sync.Mutex
	last []prometheus.Metric // the last report's series; nil before the first
	at   time.Time           // when last was computed
}

// NewCollector returns a collector of what source reads; it exports
// nothing until Start.
func NewCollector(source Source, opts CollectorOptions, log logr.Logger) *Collector {
	if opts.MaxNamespaces <= 0 {
		opts.MaxNamespaces = DefaultMaxNamespaces
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.MinInterval == 0 {
		opts.MinInterval = 10 * time.Second
	}
	c := &Collector{source: source, opts: opts, log: log, clock: opts.Clock}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	return c
}

// Start marks the process as leading until ctx ends. The manager starts it
// once elected (NeedLeaderElection), and ends ctx when the lead is lost;
// the last report is then dropped, so a lead regained computes afresh.
func (c *Collector) Start(ctx context.Context) error {
	c.leading.Store(true)
	<-ctx.Done()
	c.leading.Store(false)
	c.mu.Lock()
	c.last = nil
	c.mu.Unlock()
	return nil
}

// NeedLeaderElection is true: only the leader exports.
func (c *Collector) NeedLeaderElection() bool { return true }

var (
	poolLabels = []string{"pool", "model", "mode"}
	nsLabels   = []string{"pool", "model", "mode", "namespace"}

	descCapacityMiB   = desc("capacity_mib", "GPU memory the pool's nodes hand out, in MiB (real sizes).", poolLabels)
	descCapacityGPUs  = desc("capacity_gpus", "Physical GPUs of the pool.", poolLabels)
	descAllocatedMiB  = desc("allocated_mib", "GPU memory held by bound pods, in MiB, by namespace and form (mig, share, whole, time-sliced).", append(nsLabels, "form"))
	descAllocatedGPUs = desc("allocated_gpus", "GPU memory held by bound pods, in GPUs of the pool's model (allocated_mib over one GPU's MiB).", append(nsLabels, "form"))
	descFreeMiB       = desc("free_mib", "GPU memory no bound pod holds, in MiB.", poolLabels)
	descFreeGPUs      = desc("free_gpus", "GPU memory no bound pod holds, in GPUs of the pool's model.", poolLabels)
	descStrandedMiB   = desc("stranded_mib", "Free GPU memory that no pending pod and no typical size of the policy data can use, given the nodes' free CPU and memory, in MiB (docs/metrics.md).", poolLabels)
	descStrandedGPUs  = desc("stranded_gpus", "stranded_mib in GPUs of the pool's model.", poolLabels)
	descFragMiB       = desc("fragmentation_mib", "The placement score's fragmentation measure over the pool's derived workload, summed over its nodes, in MiB (docs/metrics.md).", poolLabels)
	descPendingPods   = desc("pending_pods", "GPU pods waiting for a node, by namespace and reason.", append(nsLabels, "reason"))
	descPendingMiB    = desc("pending_mib", "GPU memory the waiting pods ask, in MiB, by namespace and reason.", append(nsLabels, "reason"))
	descQuotaHard     = desc("quota_hard_mib", "The gpuadmit ResourceQuota's hard limit on GPU memory in every form, in MiB.", []string{"namespace"})
	descQuotaUsed     = desc("quota_used_mib", "The gpuadmit ResourceQuota's use of GPU memory in every form, in MiB.", []string{"namespace"})
	descGPUAllocated  = desc("gpu_allocated_mib", "GPU memory allocated on one GPU whose allocation is known (DRA), labelled with its UUID as DCGM's exporter labels it.", []string{"UUID", "node", "pool", "model"})
	descPrice         = desc("price_per_gpu_hour", "The price of one GPU-hour of the model, from the policy data.", []string{"model"})
	descFolded        = desc("usage_folded_namespaces", "Namespaces summed under namespace=\""+OtherNamespace+"\" because more than the bound hold or wait for GPU.", nil)
	descDuration      = desc("usage_compute_seconds", "How long this scrape took to read the caches and compute the report.", nil)
	descUp            = desc("usage_up", "1 when this scrape computed the report, 0 when reading its input failed.", nil)
)

func desc(name, help string, labels []string) *prometheus.Desc {
	return prometheus.NewDesc("gpuadmit_"+name, help, labels, nil)
}

// Describe sends every series' description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) { Describe(ch) }

// Describe sends the description of every series a Collector exports, for
// a collector that delegates to Collectors.
func Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCapacityMiB, descCapacityGPUs, descAllocatedMiB, descAllocatedGPUs,
		descFreeMiB, descFreeGPUs, descStrandedMiB, descStrandedGPUs, descFragMiB, descPendingPods, descPendingMiB,
		descQuotaHard, descQuotaUsed, descGPUAllocated, descPrice, descFolded, descDuration, descUp} {
		ch <- d
	}
}

// Collect sends the report's series while the process leads, none otherwise.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if !c.leading.Load() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil || c.clock.Since(c.at) >= c.opts.MinInterval {
		ms, ok := c.compute()
		if !ok { // not kept: the next scrape tries again
			for _, m := range ms {
				ch <- m
			}
			return
		}
		c.last, c.at = ms, c.clock.Now()
	}
	for _, m := range c.last {
		ch <- m
	}
}

// compute reads the source and turns the report into series; on a failed
// read, only gpuadmit_usage_up 0, and false.
func (c *Collector) compute() ([]prometheus.Metric, bool) {
	start := c.clock.Now()
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	in, err := c.source.Input(ctx)
	if err != nil {
		c.log.Error(err, "Cannot read the GPU usage input; exporting no usage series this scrape")
		return []prometheus.Metric{gauge(descUp, 0)}, false
	}
	r := Compute(in)
	folded := Fold(&r, c.opts.MaxNamespaces)
	ch := make(chan prometheus.Metric)
	var out []prometheus.Metric
	done := make(chan struct{})
	go func() {
		for m := range ch {
			out = append(out, m)
		}
		close(done)
	}()
	emit(ch, r)
	close(ch)
	<-done
	return append(out, gauge(descFolded, float64(folded)),
		gauge(descDuration, c.clock.Since(start).Seconds()), gauge(descUp, 1)), true
}

func gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

// emit sends r's series.
func emit(ch chan<- prometheus.Metric, r Report) {
	for _, p := range r.Pools {
		pl := []string{p.Name, p.Model, string(p.Mode)}
		gpus := func(mib int64) float64 {
			if p.GPUMemoryMiB <= 0 {
				return 0
			}
			return float64(mib) / float64(p.GPUMemoryMiB)
		}
		if p.Name != NoPool {
			ch <- gauge(descCapacityMiB, float64(p.CapacityMiB), pl...)
			ch <- gauge(descCapacityGPUs, float64(p.GPUs), pl...)
			ch <- gauge(descFreeMiB, float64(p.FreeMiB), pl...)
			ch <- gauge(descFreeGPUs, gpus(p.FreeMiB), pl...)
			ch <- gauge(descStrandedMiB, float64(p.StrandedMiB), pl...)
			ch <- gauge(descStrandedGPUs, gpus(p.StrandedMiB), pl...)
			ch <- gauge(descFragMiB, p.FragmentationMiB, pl...)
		}
		for h, mib := range p.Allocated {
			l := append(append([]string{}, pl...), h.Namespace, string(h.Form))
			ch <- gauge(descAllocatedMiB, float64(mib), l...)
			ch <- gauge(descAllocatedGPUs, gpus(mib), l...)
		}
		for w, n := range p.Pending {
			l := append(append([]string{}, pl...), w.Namespace, string(w.Reason))
			ch <- gauge(descPendingPods, float64(n.Pods), l...)
			ch <- gauge(descPendingMiB, float64(n.MiB), l...)
		}
	}
	for _, q := range r.Quotas {
		ch <- gauge(descQuotaHard, float64(q.HardMiB), q.Namespace)
		ch <- gauge(descQuotaUsed, float64(q.UsedMiB), q.Namespace)
	}
	for _, g := range r.GPUs {
		ch <- gauge(descGPUAllocated, float64(g.AllocatedMiB), g.UUID, g.Node, g.Pool, g.Model)
	}
	for m, price := range r.Prices {
		ch <- gauge(descPrice, price, m)
	}
}

// Fold keeps the max namespaces with the most GPU memory allocated and
// pending, by name, and sums the others' allocated and pending figures
// under OtherNamespace; it returns how many it summed. Quotas are one
// series pair per namespace that declares one, which the policy data
// bounds, and are left as they are.
func Fold(r *Report, max int) int {
	weight := map[string]int64{}
	for _, p := range r.Pools {
		for h, mib := range p.Allocated {
			weight[h.Namespace] += mib
		}
		for w, n := range p.Pending {
			weight[w.Namespace] += n.MiB
		}
	}
	if len(weight) <= max {
		return 0
	}
	names := sortedKeys(weight)
	sort.SliceStable(names, func(i, j int) bool { return weight[names[i]] > weight[names[j]] })
	keep := map[string]bool{}
	for _, n := range names[:max] {
		keep[n] = true
	}
	for i := range r.Pools {
		p := &r.Pools[i]
		alloc := map[Holder]int64{}
		for h, mib := range p.Allocated {
			if !keep[h.Namespace] {
				h.Namespace = OtherNamespace
			}
			alloc[h] += mib
		}
		pend := map[Waiter]Waiting{}
		for w, n := range p.Pending {
			if !keep[w.Namespace] {
				w.Namespace = OtherNamespace
			}
			got := pend[w]
			pend[w] = Waiting{Pods: got.Pods + n.Pods, MiB: got.MiB + n.MiB}
		}
		p.Allocated, p.Pending = alloc, pend
	}
	return len(names) - max
}
