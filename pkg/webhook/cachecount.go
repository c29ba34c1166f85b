package webhook

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// cacheObjects exports gpuadmit_cache_objects{kind}: how many objects of
// each kind the process's informers hold, the figure the memory formula in
// docs/scale.md multiplies. Each informer counts its own adds and deletes,
// so a scrape lists nothing; a Run's informers leave the sum when it ends
// (the end-to-end tests Run several times in one process).
var cacheObjects = &objectCounts{counts: map[*kindCount]bool{}}

func init() { metrics.Registry.MustRegister(cacheObjects) }

const cacheObjectsHelp = "Objects in this process's informer caches, by kind (Pod counts only gpuadmit's pods: the cache holds no other)."

var cacheObjectsDesc = prometheus.NewDesc("gpuadmit_cache_objects", cacheObjectsHelp, []string{"kind"}, nil)

type objectCounts struct {
	mu     sync.Mutex
	counts map[*kindCount]bool
}

// kindCount is one informer's object count.
type kindCount struct {
	kind string
	n    atomic.Int64
}

// newInformer is a cache.Options.NewInformer that counts each informer's
// objects until ctx ends.
func (c *objectCounts) newInformer(ctx context.Context) func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, idx toolscache.Indexers) toolscache.SharedIndexInformer {
		inf := toolscache.NewSharedIndexInformer(lw, obj, resync, idx)
		kc := &kindCount{kind: kindOf(obj)}
		if _, err := inf.AddEventHandler(kc.handler()); err != nil {
			return inf // not started yet: AddEventHandler cannot fail here
		}
		c.add(kc)
		go func() {
			<-ctx.Done()
			c.remove(kc)
		}()
		return inf
	}
}

// kindOf is the kind of an informer's example object (a typed, empty one).
func kindOf(obj runtime.Object) string {
	if k := obj.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	t := reflect.TypeOf(obj)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

func (kc *kindCount) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { kc.n.Add(1) },
		DeleteFunc: func(any) { kc.n.Add(-1) },
	}
}

func (c *objectCounts) add(kc *kindCount) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[kc] = true
}

func (c *objectCounts) remove(kc *kindCount) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.counts, kc)
}

// Describe sends the one description.
func (c *objectCounts) Describe(ch chan<- *prometheus.Desc) { ch <- cacheObjectsDesc }

// Collect sends the count of each kind, summed over the live informers.
func (c *objectCounts) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	sums := map[string]int64{}
	for kc := range c.counts {
		sums[kc.kind] += kc.n.Load()
	}
	c.mu.Unlock()
	for kind, n := range sums {
		ch <- prometheus.MustNewConstMetric(cacheObjectsDesc, prometheus.GaugeValue, float64(n), kind)
	}
}
