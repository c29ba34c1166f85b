package agent

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// The Node is written through controller-runtime's fake client here; the
// end-to-end tests against a real kube-apiserver (test/e2e) are where the
// agent's RBAC and its patches will meet the API server's own validation.

// quantities reads a resource list as integers, for comparing.
func quantities(list corev1.ResourceList) map[string]int64 {
	out := map[string]int64{}
	for name, q := range list {
		out[string(name)] = q.Value()
	}
	return out
}

// TestAgentPublishesItsNode runs the agent on a node of two H100s and reads
// the Node back: the annotation lists the GPUs as discovered, the
// accounting capacity is their memory, the replaced model's resource is
// gone, and every resource the agent does not own is untouched.
func TestAgentPublishesItsNode(t *testing.T) {
	h := newHarness(t, 2)
	a, _, _ := h.start()
	var n *corev1.Node
	eventually(t, "the agent annotates its node", func() bool {
		n = h.node()
		return n.Annotations[AnnotationGPUs] != ""
	})
	eventually(t, "the agent advertises its capacity", func() bool {
		n = h.node()
		_, ok := n.Status.Capacity[ResourceMemoryMiB]
		return ok
	})
	var published []GPU
	if err := json.Unmarshal([]byte(n.Annotations[AnnotationGPUs]), &published); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a.GPUs(), published); diff != "" {
		t.Errorf("annotation (-discovered +published):\n%s", diff)
	}
	if len(published) != 2 || published[1].Model != "H100-80GB" || len(published[1].Profiles) != 7 {
		t.Errorf("annotation lacks the GPUs' detail: %+v", published)
	}
	var share allocator.ShareOffer
	if err := json.Unmarshal([]byte(n.Annotations[AnnotationShare]), &share); err != nil {
		t.Fatalf("share annotation %q: %v", n.Annotations[AnnotationShare], err)
	}
	if want := (allocator.ShareOffer{Resource: ResourceShare, UnitMiB: testUnitMiB, SharesPerGPU: testShares}); share != want {
		t.Errorf("share annotation = %+v, want %+v", share, want)
	}
	want := map[string]int64{
		"cpu": 32, "nvidia.com/gpu": 0, ResourceShare: 158, // not the agent's: as they were
		ResourceMemoryMiB: 2 * 81559, "gpuadmit.io/h100-80gb-mib": 2 * 81559,
	}
	for what, list := range map[string]corev1.ResourceList{"capacity": n.Status.Capacity, "allocatable": n.Status.Allocatable} {
		if diff := cmp.Diff(want, quantities(list)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", what, diff)
		}
	}
}

func TestAccounting(t *testing.T) {
	h100 := GPU{Model: "H100-80GB", MemoryMiB: 81559, Healthy: true}
	t4 := GPU{Model: "T4", MemoryMiB: 15360, Healthy: true}
	sick := h100
	sick.Healthy = false
	tests := map[string]struct {
		gpus []GPU
		want map[string]int64
	}{
		"two H100s": {gpus: []GPU{h100, h100}, want: map[string]int64{
			ResourceMemoryMiB: 163118, "gpuadmit.io/h100-80gb-mib": 163118,
		}},
		"a failed GPU leaves the capacity": {gpus: []GPU{h100, sick}, want: map[string]int64{
			ResourceMemoryMiB: 81559, "gpuadmit.io/h100-80gb-mib": 81559,
		}},
		"mixed models, each its own resource": {gpus: []GPU{h100, t4}, want: map[string]int64{
			ResourceMemoryMiB: 96919, "gpuadmit.io/h100-80gb-mib": 81559, "gpuadmit.io/t4-mib": 15360,
		}},
		"no healthy GPU advertises zero": {gpus: []GPU{sick}, want: map[string]int64{ResourceMemoryMiB: 0}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Accounting(tc.gpus)); diff != "" {
				t.Errorf("Accounting (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPublishRemovesOnlyStaleAccounting writes twice: a model resource the
// second write lacks is removed, the kubelet's resources are kept.
func TestPublishRemovesOnlyStaleAccounting(t *testing.T) {
	c := fake.NewClientBuilder().WithObjects(gpuNode()).WithStatusSubresource(&corev1.Node{}).Build()
	p := &publisher{client: c, node: nodeName}
	ctx := context.Background()
	for _, gpus := range [][]GPU{
		{{UUID: "GPU-a", Model: "T4", MemoryMiB: 15360, Healthy: true}},
		{{UUID: "GPU-b", Model: "L4", MemoryMiB: 23034, Healthy: true}},
	} {
		if err := p.publish(ctx, gpus, allocator.ShareOffer{}, false); err != nil {
			t.Fatal(err)
		}
	}
	n := &corev1.Node{}
	if err := c.Get(ctx, clientKey(nodeName), n); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{
		"cpu": 32, "nvidia.com/gpu": 0, ResourceShare: 158, ResourceMemoryMiB: 23034, "gpuadmit.io/l4-mib": 23034,
	}
	if diff := cmp.Diff(want, quantities(n.Status.Allocatable)); diff != "" {
		t.Errorf("allocatable (-want +got):\n%s", diff)
	}
	if got := n.Status.Capacity["gpuadmit.io/t4-mib"]; !got.Equal(resource.Quantity{}) {
		t.Errorf("capacity keeps the replaced T4's resource: %s", got.String())
	}
}

func TestPublishFailsWithoutItsNode(t *testing.T) {
	c := fake.NewClientBuilder().WithStatusSubresource(&corev1.Node{}).Build()
	err := (&publisher{client: c, node: "elsewhere"}).publish(context.Background(), nil, allocator.ShareOffer{}, false)
	if err == nil {
		t.Fatal("publishing on a missing node succeeded")
	}
}

// TestPublishShareOffer writes the share a node serves, then a discovery in
// which no GPU serves shares (MIG on all): the annotation goes, the GPUs' stays.
func TestPublishShareOffer(t *testing.T) {
	c := fake.NewClientBuilder().WithObjects(gpuNode()).WithStatusSubresource(&corev1.Node{}).Build()
	p := &publisher{client: c, node: nodeName}
	ctx := context.Background()
	offer := allocator.ShareOffer{Resource: ResourceShare, UnitMiB: 20389, SharesPerGPU: 4}
	tests := []struct {
		served bool
		want   string
	}{
		{served: true, want: `{"resource":"gpuadmit.io/gpu-mem","unitMiB":20389,"sharesPerGPU":4}`},
		{served: false, want: ""},
	}
	for _, tc := range tests {
		if err := p.publish(ctx, []GPU{{UUID: "GPU-a"}}, offer, tc.served); err != nil {
			t.Fatal(err)
		}
		n := &corev1.Node{}
		if err := c.Get(ctx, clientKey(nodeName), n); err != nil {
			t.Fatal(err)
		}
		got, ok := n.Annotations[AnnotationShare]
		if got != tc.want || ok != tc.served || n.Annotations[AnnotationGPUs] == "" {
			t.Errorf("served %v: share annotation %q (present %v), want %q; gpus annotation %q",
				tc.served, got, ok, tc.want, n.Annotations[AnnotationGPUs])
		}
	}
}

// TestPublishOnlyServesNoDevices: on a node whose GPUs NVIDIA's device plugin
// serves, the agent only writes the GPUs and the accounting capacity (which
// the webhook's GPU pods always request), registers no device plugin and
// offers no shares.
func TestPublishOnlyServesNoDevices(t *testing.T) {
	h := newHarness(t, 2)
	o := h.options()
	o.PublishOnly = true
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go New(h.nvml, h.nodes, o).Run(ctx)
	eventually(t, "the node advertises both GPUs' memory", func() bool {
		return h.node().Status.Capacity.Name(ResourceMemoryMiB, "DecimalSI").Value() == 2*81559
	})
	if _, ok := h.node().Annotations[AnnotationShare]; ok {
		t.Error("a publish-only agent offers shares")
	}
	select {
	case r := <-h.kubelet.registrations:
		t.Errorf("a publish-only agent registered %s with the kubelet", r.ResourceName)
	default:
	}
}

// TestDRANodeNeverRefusesAPodForAccounting: a pod with DRA alternatives is
// charged its largest alternative (up to 8 GPUs of the largest catalog
// model), whatever device the scheduler then gives it. The DRA agent's
// NodePublisher advertises ResourceMemoryMiB as quota-only capacity, so a
// node's pod capacity of such pods, each charged the most any pod can be,
// fits in its allocatable as the scheduler's NodeResourcesFit sums them;
// the per-model resource keeps the GPUs' real memory. Advertised at the
// real memory (as before), the second such pod would be refused while the
// node's devices are free.
func TestDRANodeNeverRefusesAPodForAccounting(t *testing.T) {
	var largest int64
	for _, m := range allocator.Default().Models() {
		largest = max(largest, m.MemoryMiB)
	}
	charge := 8 * largest
	const maxPods = 110 // the kubelet's default
	c := fake.NewClientBuilder().WithObjects(gpuNode()).WithStatusSubresource(&corev1.Node{}).Build()
	ctx := context.Background()
	if err := NewNodePublisher(c, nodeName).Publish(ctx, []GPU{{UUID: "GPU-a", Model: "A100-40GB", MemoryMiB: 40960, Healthy: true}}); err != nil {
		t.Fatal(err)
	}
	n := &corev1.Node{}
	if err := c.Get(ctx, clientKey(nodeName), n); err != nil {
		t.Fatal(err)
	}
	alloc := quantities(n.Status.Allocatable)
	if got := alloc[ResourceMemoryMiB]; got < maxPods*charge {
		t.Errorf("a DRA node with one free GPU advertises %s=%d, which refuses pod %d of %d charged %d MiB each",
			ResourceMemoryMiB, got, got/charge+1, maxPods, charge)
	}
	if got := alloc[ModelResource("A100-40GB")]; got != 40960 {
		t.Errorf("%s = %d, want the GPU's real 40960 MiB", ModelResource("A100-40GB"), got)
	}
	if got := DRAAccounting([]GPU{{Model: "A100-40GB", MemoryMiB: 40960}}); got[ResourceMemoryMiB] != 0 {
		t.Errorf("a DRA node without a healthy GPU advertises %s=%d, want 0: it serves nothing", ResourceMemoryMiB, got[ResourceMemoryMiB])
	}
}

// writeCounter is a NodeClient that counts the writes it passes on.
type writeCounter struct {
	client.Client
	patches, statusPatches int
}

func (w *writeCounter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	w.patches++
	return w.Client.Patch(ctx, obj, patch, opts...)
}

func (w *writeCounter) Status() client.SubResourceWriter { return &statusCounter{w.Client.Status(), w} }

type statusCounter struct {
	client.SubResourceWriter
	w *writeCounter
}

func (s *statusCounter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	s.w.statusPatches++
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// TestPublishWritesOnlyWhatChanged publishes as the resync does, again
// and again: the first publish writes the annotations and the capacity,
// a publish of the same GPUs writes nothing (before, every resync sent
// both patches to the API server), and a GPU lost writes both once.
func TestPublishWritesOnlyWhatChanged(t *testing.T) {
	c := &writeCounter{Client: fake.NewClientBuilder().WithObjects(gpuNode()).WithStatusSubresource(&corev1.Node{}).Build()}
	p := &publisher{client: c, node: nodeName}
	ctx := context.Background()
	two := []GPU{
		{UUID: "GPU-a", Model: "H100-80GB", MemoryMiB: 81559, Healthy: true},
		{UUID: "GPU-b", Model: "H100-80GB", MemoryMiB: 81559, Healthy: true},
	}
	lost := []GPU{two[0]}
	offer := allocator.ShareOffer{Resource: ResourceShare, UnitMiB: 20389, SharesPerGPU: 4}
	type writes struct{ Patches, StatusPatches int }
	steps := []struct {
		what   string
		gpus   []GPU
		served bool
		want   writes
	}{
		{what: "first publish", gpus: two, served: true, want: writes{1, 1}},
		{what: "resync, nothing changed", gpus: two, served: true, want: writes{0, 0}},
		{what: "second resync, nothing changed", gpus: two, served: true, want: writes{0, 0}},
		{what: "one GPU lost", gpus: lost, served: true, want: writes{1, 1}},
		{what: "resync after the loss", gpus: lost, served: true, want: writes{0, 0}},
		{what: "shares no longer served", gpus: lost, served: false, want: writes{1, 0}},
		{what: "resync without shares", gpus: lost, served: false, want: writes{0, 0}},
	}
	for _, s := range steps {
		c.patches, c.statusPatches = 0, 0
		if err := p.publish(ctx, s.gpus, offer, s.served); err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
		if diff := cmp.Diff(s.want, writes{c.patches, c.statusPatches}); diff != "" {
			t.Errorf("%s: writes (-want +got):\n%s", s.what, diff)
		}
	}
	n := &corev1.Node{}
	if err := c.Get(ctx, clientKey(nodeName), n); err != nil {
		t.Fatal(err)
	}
	if got := n.Status.Allocatable[ResourceMemoryMiB]; got.Value() != 81559 {
		t.Errorf("allocatable %s = %s after the loss, want 81559", ResourceMemoryMiB, got.String())
	}
}
