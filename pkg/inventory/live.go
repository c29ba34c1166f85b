package inventory

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

var poolCount = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "gpuadmit_inventory_pools",
	Help: "GPU pools in the inventory this replica decides with.",
})

func init() { metrics.Registry.MustRegister(poolCount) }

// Live is the inventory of a running cluster: it rebuilds from a cached Node
// list when a node's labels, taints or allocatable changed, on the first
// decision after the change, and shares one immutable Inventory otherwise.
type Live struct {
	nodes client.Reader
	cat   *allocator.Catalog
	log   logr.Logger
	// Events, when set, receives a Warning Event on each node the inventory
	// refuses, once per reason; nil logs only.
	Events events.EventRecorder
	// Slices, when set, lists ResourceSlices (a cache whose ResourceSlice
	// informer is wired to Handler), so nodes of gpuadmit's DRA driver form
	// pools; nil where the cluster serves no resource.k8s.io/v1.
	Slices client.Reader
	// Classes, when set, tells which DeviceClass the scheduler uses for an
	// extended resource (dynamic-resource-allocation's ExtendedResourceCache,
	// fed by a DeviceClass informer wired to Handler too); nil takes
	// gpuadmit's classes as the ones in use.
	Classes DeviceClassLookup

	refused map[string]string // node → reason last reported; under mu

	gen  atomic.Uint64 // bumped by node events that matter
	mu   sync.Mutex    // one rebuild at a time
	snap atomic.Pointer[snapshot]
}

type snapshot struct {
	gen uint64
	inv *Inventory
}

// NewLive reads Nodes from nodes (a controller-runtime cache); the caller
// wires Handler to that cache's Node informer.
func NewLive(nodes client.Reader, cat *allocator.Catalog, log logr.Logger) *Live {
	if cat == nil {
		cat = allocator.Default()
	}
	l := &Live{nodes: nodes, cat: cat, log: log}
	l.gen.Store(1)
	return l
}

// Inventory returns the pools as of the last node change.
func (l *Live) Inventory() *Inventory {
	if s := l.snap.Load(); s != nil && s.gen == l.gen.Load() {
		return s.inv
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	gen := l.gen.Load()
	if s := l.snap.Load(); s != nil && s.gen == gen {
		return s.inv
	}
	var nodes corev1.NodeList
	if err := l.nodes.List(context.Background(), &nodes); err != nil {
		l.log.Error(err, "list nodes; keeping the last inventory")
		if s := l.snap.Load(); s != nil {
			return s.inv
		}
		return Build(nil, l.cat)
	}
	var slices resourceapi.ResourceSliceList
	if l.Slices != nil {
		if err := l.Slices.List(context.Background(), &slices); err != nil {
			l.log.Error(err, "list resourceslices; keeping the last inventory")
			if s := l.snap.Load(); s != nil {
				return s.inv
			}
		}
	}
	inv := BuildDRA(nodes.Items, DRA{Slices: slices.Items, ClassFor: l.classFor()}, l.cat)
	l.snap.Store(&snapshot{gen: gen, inv: inv})
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

// Handler marks the inventory stale on node events that change what Build
// reads, and on every ResourceSlice event when wired to that informer too.
func (l *Live) Handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { l.gen.Add(1) },
		DeleteFunc: func(any) { l.gen.Add(1) },
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.Node)
			n, ok2 := newObj.(*corev1.Node)
			if !ok1 || !ok2 || relevantChange(o, n) { // a ResourceSlice update always matters
				l.gen.Add(1)
			}
		},
	}
}

// relevantChange ignores heartbeats and conditions: only what pools are built
// from, the agent's annotations included.
func relevantChange(o, n *corev1.Node) bool {
	return !equality.Semantic.DeepEqual(o.Labels, n.Labels) ||
		o.Annotations[allocator.AnnotationGPUs] != n.Annotations[allocator.AnnotationGPUs] ||
		o.Annotations[allocator.AnnotationShare] != n.Annotations[allocator.AnnotationShare] ||
		!equality.Semantic.DeepEqual(o.Spec.Taints, n.Spec.Taints) || o.Spec.Unschedulable != n.Spec.Unschedulable ||
		!equality.Semantic.DeepEqual(o.Status.Allocatable, n.Status.Allocatable)
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
