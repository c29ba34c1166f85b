package scale

import (
	"encoding/json"
	"path/filepath"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/gpuadmit/gpuadmit/pkg/agent"
	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/webhook"
)

// BenchmarkHeapPerFleetNode reports the heap per node of the scale
// benchmark's own fleet as the webhook holds it: each Node (with, on a DRA
// node, the agent's annotation and accounting, as NodePublisher writes
// them) and ResourceSlice decoded from JSON and transformed as the cache
// transforms it, in a store as controller-runtime's informers keep it,
// listed, and one inventory built from the lists. "dra-every-5" is the
// fleet `gpuadmit-bench scale` runs; "slices-whole" caches the slices
// whole (the cache before webhook.SliceTransform); "updated" replaces
// every Node in its store after the build with a new decoding of itself,
// as a node's update that changes nothing the inventory reads does (the
// inventory keeps the old one's labels); "device-plugin" and
// "dra" are fleets of one kind. The slices are stripped as a serving
// replica (RoleWebhook) strips them.
func BenchmarkHeapPerFleetNode(b *testing.B) {
	const n = 2000
	root, err := filepath.Abs("../..")
	if err != nil {
		b.Fatal(err)
	}
	served := func() toolscache.TransformFunc { return webhook.SliceTransform(webhook.RoleWebhook) }
	for _, c := range []struct {
		name     string
		draEvery int
		slices   func() toolscache.TransformFunc
		updated  bool
	}{
		{"dra-every-5", 5, served, false},
		{"dra-every-5/updated", 5, served, true},
		{"dra-every-5/slices-whole", 5, cache.TransformStripManagedFields, false},
		{"dra-every-5/updated/slices-whole", 5, cache.TransformStripManagedFields, true},
		{"device-plugin", 0, served, false},
		{"dra", 1, served, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			f, err := fleet(root, n, c.draEvery)
			if err != nil {
				b.Fatal(err)
			}
			published(b, f)
			var per float64
			for range b.N {
				per = heapOfFleet(b, f, c.slices(), c.updated) / n // a new cache's transform
			}
			b.ReportMetric(per, "B/node")
		})
	}
}

// published gives each DRA node of f what the agent's NodePublisher
// writes on it: the GPUs annotation and the accounting resources.
func published(b *testing.B, f []gpuNode) {
	for i := range f {
		if f[i].gpus == nil {
			continue
		}
		v, err := json.Marshal(f[i].gpus)
		if err != nil {
			b.Fatal(err)
		}
		f[i].node.Annotations = map[string]string{allocator.AnnotationGPUs: string(v)}
		for r, q := range agent.DRAAccounting(f[i].gpus) {
			f[i].node.Status.Allocatable[corev1.ResourceName(r)] = *resource.NewQuantity(q, resource.DecimalSI)
			f[i].node.Status.Capacity[corev1.ResourceName(r)] = *resource.NewQuantity(q, resource.DecimalSI)
		}
	}
}

// heapOfFleet is the heap the fleet's cached objects and inventory keep
// alive, measured after a collection around them.
func heapOfFleet(b *testing.B, f []gpuNode, sliceTransform toolscache.TransformFunc, updated bool) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	idx := toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}
	nodes := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, idx)
	slices := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, idx)
	for i := range f {
		add(b, nodes, inventory.StripNode, &f[i].node, &corev1.Node{})
		for j := range f[i].slices {
			add(b, slices, sliceTransform, &f[i].slices[j], &resourceapi.ResourceSlice{})
		}
	}
	var nl []corev1.Node
	for _, o := range nodes.List() {
		nl = append(nl, *o.(*corev1.Node))
	}
	var sl []resourceapi.ResourceSlice
	for _, o := range slices.List() {
		sl = append(sl, *o.(*resourceapi.ResourceSlice))
	}
	inv := inventory.BuildWithSlices(nl, sl, nil)
	nl, sl = nil, nil // a rebuild's lists are garbage once it is built
	if updated {
		for i := range f {
			add(b, nodes, inventory.StripNode, &f[i].node, &corev1.Node{})
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive([]any{nodes, slices, inv})
	return float64(after.HeapAlloc) - float64(before.HeapAlloc)
}

// add decodes obj from its JSON into into, transforms it and stores it
// (replacing the object of its name).
func add(b *testing.B, store toolscache.Indexer, tr toolscache.TransformFunc, obj, into any) {
	data, err := json.Marshal(obj)
	if err != nil {
		b.Fatal(err)
	}
	if err := json.Unmarshal(data, into); err != nil {
		b.Fatal(err)
	}
	held, err := tr(into)
	if err != nil {
		b.Fatal(err)
	}
	if err := store.Update(held); err != nil {
		b.Fatal(err)
	}
}
