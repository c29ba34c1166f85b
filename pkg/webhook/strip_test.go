package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/claim"
	"github.com/gpuadmit/gpuadmit/pkg/handover"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate"
	"github.com/gpuadmit/gpuadmit/pkg/usage"
)

// podTransform is the transform the manager's cache applies to Pods.
func podTransform(t testing.TB) toolscache.TransformFunc {
	t.Helper()
	o := cacheOptions(context.Background(), Options{SchedulerLeaseNamespace: "gpuadmit-system"})
	for obj, by := range o.ByObject {
		if _, ok := obj.(*corev1.Pod); ok && by.Transform != nil {
			return by.Transform
		}
	}
	return o.DefaultTransform
}

// cachedPods are n realistic pods through the cache's transform.
func cachedPods(t testing.TB, n int) (whole, cached []*corev1.Pod) {
	tr := podTransform(t)
	for i := range n {
		p := decoded(realisticPod(i))
		whole = append(whole, p)
		got, err := tr(decoded(realisticPod(i)))
		if err != nil {
			t.Fatal(err)
		}
		cached = append(cached, got.(*corev1.Pod))
	}
	return whole, cached
}

// TestStripPodKeepsWhatTheReadersRead: every reader of the cache's pods
// answers the same of the cached pod as of the whole one.
func TestStripPodKeepsWhatTheReadersRead(t *testing.T) {
	whole, cached := cachedPods(t, 60)
	type answers struct {
		Placement, Pool         string
		Requests                map[string]int64
		Demand                  string // all of the pod's requests: the usage report reads its CPU and memory
		Waiting                 handover.Waiting
		Waits                   bool
		Reason                  usage.Reason
		Namespace, Name, GenRef string
		Kind                    string // the pick's workload: the models the pod accepts, the model and MiB it holds
	}
	read := func(p *corev1.Pod) answers {
		w, ok := handover.WaitingOf(p)
		a := answers{Placement: placement(p), Pool: mutate.PoolOf(p), Requests: heldRequests(p), Waiting: w, Waits: ok,
			Reason: usage.ReasonOf(p), Namespace: p.Namespace, Name: p.Name, GenRef: p.GenerateName,
			Demand: fmt.Sprint(resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{SkipPodLevelResources: true}))}
		k, ok := podKindOf(p, placed{key: placement(p), req: heldRequests(p)})
		a.Kind = fmt.Sprintf("%+v %v", k, ok)
		return a
	}
	for i := range whole {
		if diff := cmp.Diff(read(whole[i]), read(cached[i])); diff != "" {
			t.Errorf("pod %d: the readers answer differently of the cached pod (-whole +cached):\n%s", i, diff)
		}
	}
	if diff := cmp.Diff(usageOf(t, whole), usageOf(t, cached)); diff != "" {
		t.Errorf("the usage report differs on cached pods (-whole +cached):\n%s", diff)
	}
	if diff := cmp.Diff(templatesFor(t, whole), templatesFor(t, cached)); diff != "" {
		t.Errorf("the claim-template reconciler keeps other templates for cached pods (-whole +cached):\n%s", diff)
	}
}

// usageOf is the usage report over pods, on H100 MIG nodes named as the pods' nodes.
func usageOf(t *testing.T, pods []*corev1.Pod) usage.Report {
	t.Helper()
	var nodes []corev1.Node
	for i := range 60 {
		n := h100MIGNode(fmt.Sprintf("gpu-%04d", i))
		nodes = append(nodes, n)
	}
	inv := inventory.Build(nodes, allocator.Default())
	return usage.Compute(usage.Input{Inventory: inv, Nodes: nodes, Pods: pods})
}

func h100MIGNode(name string) corev1.Node {
	n := corev1.Node{}
	n.Name = name
	n.Labels = map[string]string{inventory.LabelProduct: "NVIDIA-H100-80GB-HBM3", inventory.LabelMIGStrategy: "mixed"}
	n.Status.Allocatable = corev1.ResourceList{}
	for r, q := range map[string]string{"cpu": "96", "memory": "1Ti", "nvidia.com/mig-3g.40gb": "8",
		"gpuadmit.io/gpu-memory-mib": "323584", "gpuadmit.io/h100-80gb-mib": "323584"} {
		n.Status.Allocatable[corev1.ResourceName(r)] = resource.MustParse(q)
	}
	return n
}

// templatesFor is, per namespace, the templates the claim reconciler keeps for pods.
func templatesFor(t *testing.T, pods []*corev1.Pod) map[string][]string {
	t.Helper()
	scheme := clientgoscheme.Scheme
	b := fake.NewClientBuilder().WithScheme(scheme)
	namespaces := map[string]bool{}
	for _, p := range pods {
		p := p.DeepCopy()
		p.ResourceVersion = ""
		if p.DeletionTimestamp != nil {
			p.Finalizers = []string{"test.gpuadmit.io/keep"} // the fake client keeps no deleting object without one
		}
		b = b.WithObjects(p)
		namespaces[p.Namespace] = true
	}
	c := b.Build()
	r := claim.NewReconciler(c, noEvents{}, clocktesting.NewFakePassiveClock(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)))
	out := map[string][]string{}
	for ns := range namespaces {
		if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		list := &resourceapi.ResourceClaimTemplateList{}
		if err := c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, tmpl := range list.Items {
			out[ns] = append(out[ns], tmpl.Name)
		}
		slices.Sort(out[ns])
	}
	return out
}

// heapPerPod is the heap one pod of n (pod(0)…pod(n-1)) takes in an informer's store (a map
// by namespace/name) once tr has had it, decoded from the API server's
// JSON: the figure the webhook's memory grows by per GPU pod.
func heapPerPod(tb testing.TB, tr toolscache.TransformFunc, n int, pod func(int) *corev1.Pod) float64 {
	tb.Helper()
	raw := make([][]byte, n)
	for i := range n {
		b, err := json.Marshal(pod(i))
		if err != nil {
			tb.Fatal(err)
		}
		raw[i] = b
	}
	store := make(map[string]any, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		p := &corev1.Pod{}
		if err := json.Unmarshal(raw[i], p); err != nil {
			tb.Fatal(err)
		}
		obj, err := tr(p)
		if err != nil {
			tb.Fatal(err)
		}
		store[p.Namespace+"/"+p.Name] = obj
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(store)
	runtime.KeepAlive(raw) // else the JSON, dead after the loop, is freed inside the measurement
	return (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(n)
}

// cachedPodBound is what one cached GPU pod may cost. The same pods cached
// whole (managed fields stripped: the cache before StripPod) cost about
// 11.6 KB each, 1.6 GiB at 150,000 GPU pods per replica; stripped, about
// 4.4 to 4.7 KB, most of it the fixed size of a corev1.Pod (1,240 bytes),
// a corev1.Container (408 each) and their requests maps.
const cachedPodBound = 5500

// TestCachedPodStaysSmall: a GPU pod in the webhook's cache costs at most
// cachedPodBound bytes of heap, and no more when the pod carries more of
// what gpuadmit does not read (env, volumes, a kubectl apply record).
func TestCachedPodStaysSmall(t *testing.T) {
	tr := podTransform(t)
	got := heapPerPod(t, tr, 2000, realisticPod)
	t.Logf("heap per cached pod: %.0f bytes", got)
	if got > cachedPodBound {
		t.Errorf("a cached pod takes %.0f bytes of heap, want at most %d: the cache keeps more of a pod than gpuadmit reads", got, cachedPodBound)
	}
	bloated := heapPerPod(t, tr, 2000, bloatedPod)
	if bloated-got > 64 {
		t.Errorf("a cached pod with more env, volumes and annotations takes %.0f bytes, %.0f more: the cache keeps fields gpuadmit does not read", bloated, bloated-got)
	}
}

// bloatedPod is realisticPod(i) with what real manifests add and gpuadmit
// never reads: more env, another volume, kubectl's last-applied record.
func bloatedPod(i int) *corev1.Pod {
	p := realisticPod(i)
	c := &p.Spec.Containers[0]
	for j := range 20 {
		c.Env = append(c.Env, corev1.EnvVar{Name: fmt.Sprintf("NCCL_SETTING_%d", j), Value: "value-of-some-length"})
	}
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "vllm-config"}}}})
	p.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = string(make([]byte, 2048))
	return p
}

// BenchmarkCachedPodHeap reports the heap per cached pod, whole (managed
// fields stripped: the cache before StripPod) and stripped.
func BenchmarkCachedPodHeap(b *testing.B) {
	for name, tr := range map[string]toolscache.TransformFunc{"whole": cache.TransformStripManagedFields(), "stripped": StripPod} {
		b.Run(name, func(b *testing.B) {
			var per float64
			for range b.N {
				per = heapPerPod(b, tr, 5000, realisticPod)
			}
			b.ReportMetric(per, "B/pod")
		})
	}
}

type noEvents struct{}

func (noEvents) Eventf(k8sruntime.Object, k8sruntime.Object, string, string, string, string, ...any) {
}
