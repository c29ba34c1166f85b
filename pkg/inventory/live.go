package inventory

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

var (
	poolCount = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "gpuadmit_inventory_pools",
		Help: "GPU pools in the inventory this replica decides with.",
	})
	rebuilds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gpuadmit_inventory_rebuilds_total",
		Help: "Inventory rebuilds, by trigger (background: after a change Build reads, off the admission path; first: the first inventory, before which nothing can be decided).",
	}, []string{"trigger"})
	rebuildSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "gpuadmit_inventory_rebuild_duration_seconds",
		Help:    "How long one inventory rebuild took (listing the cache and building every pool).",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
	})
)

func init() { metrics.Registry.MustRegister(poolCount, rebuilds, rebuildSeconds) }

// DefaultDebounce is how long a Live waits after a change before it
// rebuilds, so that a burst of changes (a rollout of the agent, a zone
// going NotReady) costs one rebuild.
const DefaultDebounce = 200 * time.Millisecond

// Live is the inventory of a running cluster. Decisions read the last
// inventory built, which is immutable and swapped in whole; they never
// build one and never wait for one (but for the very first, which nothing
// can be decided without). Start rebuilds in the background, Debounce
// after a change of what Build reads (relevantChange: not GFD's
// timestamp, not heartbeats). A change of other node labels, which only
// pods' node affinity reads, is swapped into the inventory's nodes as it
// comes, without a rebuild.
type Live struct {
	nodes client.Reader
	cat   *allocator.Catalog
	log   logr.Logger
	// Events, when set, receives a Warning Event on each node the inventory
	// refuses, once per reason; nil logs only.
	Events events.EventRecorder
	// Slices, when set, lists ResourceSlices (a cache whose ResourceSlice
	// informer, filtered to gpuadmit's driver, is wired to Handler), so
	// nodes of gpuadmit's DRA driver form pools; nil where the cluster
	// serves no resource.k8s.io/v1.
	Slices client.Reader
	// Classes, when set, tells which DeviceClass the scheduler uses for an
	// extended resource (dynamic-resource-allocation's ExtendedResourceCache,
	// fed by a DeviceClass informer wired to Handler too); nil takes
	// gpuadmit's classes as the ones in use.
	Classes DeviceClassLookup
	// Debounce is how long Start waits after the first change it has not
	// built before it rebuilds; changes in that time join the same
	// rebuild. Zero means DefaultDebounce.
	Debounce time.Duration
	// Clock times the debounce; nil means the real clock.
	Clock clock.Clock

	refused map[string]string // node → reason last reported; under mu
	refs    nodeRefs

	gen  atomic.Uint64 // bumped by changes Build reads
	mu   sync.Mutex    // one rebuild at a time
	snap atomic.Pointer[snapshot]
	wake chan struct{} // a change since the loop last looked
}

type snapshot struct {
	gen uint64
	inv *Inventory
}

// NewLive reads Nodes from nodes (a controller-runtime cache); the caller
// wires Handler to that cache's Node informer and runs Start (a
// manager.Runnable).
func NewLive(nodes client.Reader, cat *allocator.Catalog, log logr.Logger) *Live {
	if cat == nil {
		cat = allocator.Default()
	}
	l := &Live{nodes: nodes, cat: cat, log: log, wake: make(chan struct{}, 1)}
	l.gen.Store(1)
	return l
}

// Inventory returns the last inventory built. It never rebuilds one that
// is out of date: Start does, off the admission path. Only before the
// first build, with nothing to decide on yet, it builds and waits.
func (l *Live) Inventory() *Inventory {
	if s := l.snap.Load(); s != nil {
		return s.inv
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.snap.Load(); s != nil {
		return s.inv
	}
	return l.build("first")
}

// Rebuild builds the inventory now when a change it reads came since the
// last build, and returns the inventory in force after. Start calls it;
// nothing on the admission path does.
func (l *Live) Rebuild() *Inventory {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.snap.Load(); s != nil && s.gen == l.gen.Load() {
		return s.inv
	}
	return l.build("background")
}

// Start rebuilds the inventory in the background until ctx ends: once at
// once, then Debounce after each change Handler saw.
func (l *Live) Start(ctx context.Context) error {
	l.Rebuild()
	clk := l.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	wait := l.Debounce
	if wait <= 0 {
		wait = DefaultDebounce
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-l.wake:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-clk.After(wait):
		}
		l.Rebuild()
	}
}

// NeedLeaderElection is false: every serving replica decides with its own
// inventory.
func (l *Live) NeedLeaderElection() bool { return false }

// build lists the cache and swaps in a new inventory; l.mu is held.
func (l *Live) build(trigger string) *Inventory {
	start := time.Now()
	gen := l.gen.Load() // read before listing: a change during the list leaves the snapshot stale, to be built again
	var nodes corev1.NodeList
	if err := l.nodes.List(context.Background(), &nodes, client.UnsafeDisableDeepCopy); err != nil {
		l.log.Error(err, "list nodes; keeping the last inventory")
		if s := l.snap.Load(); s != nil {
			return s.inv
		}
		return Build(nil, l.cat)
	}
	var slices resourceapi.ResourceSliceList
	if l.Slices != nil {
		if err := l.Slices.List(context.Background(), &slices, client.UnsafeDisableDeepCopy); err != nil {
			l.log.Error(err, "list resourceslices; keeping the last inventory")
			if s := l.snap.Load(); s != nil {
				return s.inv
			}
		}
	}
	inv := buildDRA(nodes.Items, DRA{Slices: slices.Items, ClassFor: l.classFor()}, l.cat, &l.refs)
	l.refs.keepOnly(nodes.Items)
	l.snap.Store(&snapshot{gen: gen, inv: inv})
	rebuilds.WithLabelValues(trigger).Inc()
	rebuildSeconds.Observe(time.Since(start).Seconds())
	poolCount.Set(float64(len(inv.Pools)))
	for _, w := range inv.Warnings {
		l.log.V(1).Info("inventory", "warning", w)
	}
	l.reportRefusals(inv, nodes.Items)
	return inv
}

// reportRefusals logs and records each newly refused node (or new reason)
// once: the inventory is rebuilt on every relevant node change, and a
// refusal that has not changed is not news. l.mu is held.
func (l *Live) reportRefusals(inv *Inventory, nodes []corev1.Node) {
	now := make(map[string]string, len(inv.Refused))
	for _, r := range inv.Refused {
		now[r.Node] = r.Reason
		if l.refused[r.Node] == r.Reason {
			continue
		}
		l.log.Info("Node refused: gpuadmit places no GPU pod on it", "node", klog.KRef("", r.Node), "reason", r.Reason)
		if n := findNode(nodes, r.Node); n != nil && l.Events != nil {
			l.Events.Eventf(n, nil, corev1.EventTypeWarning, "GPUNodeRefused", "Inventory", "gpuadmit refuses this node: %s", r.Reason)
		}
	}
	l.refused = now
}

func findNode(nodes []corev1.Node, name string) *corev1.Node {
	for i := range nodes {
		if nodes[i].Name == name {
			return &nodes[i]
		}
	}
	return nil
}

// changed marks the inventory out of date and wakes Start.
func (l *Live) changed() {
	l.gen.Add(1)
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Handler marks the inventory out of date on node events that change what
// Build reads, and on every event of the other kinds it is wired to
// (gpuadmit's ResourceSlices, DeviceClasses). A node update that changes
// only labels Build does not read swaps them into the node's affinity
// object and rebuilds nothing.
func (l *Live) Handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*corev1.Node); ok {
				l.refs.set(n)
			}
			l.changed()
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				l.refs.remove(n.Name)
			}
			l.changed()
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.Node)
			n, ok2 := newObj.(*corev1.Node)
			if !ok1 || !ok2 { // a ResourceSlice or DeviceClass update always matters
				l.changed()
				return
			}
			l.refs.set(n)
			if relevantChange(o, n) {
				l.changed()
			}
		},
	}
}

// DeviceClassLookup finds the DeviceClass the scheduler uses for an extended
// resource; extendedresourcecache.ExtendedResourceCache satisfies it.
type DeviceClassLookup interface {
	GetDeviceClass(resourceName corev1.ResourceName) *resourceapi.DeviceClass
}

func (l *Live) classFor() func(string) string {
	if l.Classes == nil {
		return nil
	}
	return func(r string) string {
		if c := l.Classes.GetDeviceClass(corev1.ResourceName(r)); c != nil {
			return c.Name
		}
		return ""
	}
}
