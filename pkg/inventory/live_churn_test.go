package inventory_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// gfdNode is a GPU node labelled as GPU Feature Discovery labels one.
func gfdNode() corev1.Node {
	n := node("h100-0", map[string]string{
		inventory.LabelProduct: h100, inventory.LabelCount: "8", inventory.LabelMemory: "81559",
		"nvidia.com/gfd.timestamp": "1764240000", "nvidia.com/cuda.driver.major": "580",
	}, map[string]string{"nvidia.com/gpu": "8", "cpu": "96"})
	return n
}

// liveOf is a Live over c with n in it, after its first inventory.
func liveOf(t *testing.T, n corev1.Node) (*inventory.Live, client.Client) {
	t.Helper()
	c := fake.NewClientBuilder().WithObjects(&n).Build()
	live := inventory.NewLive(c, nil, logr.Discard())
	live.Handler().OnAdd(&n, true)
	if len(live.Inventory().Pools) != 1 {
		t.Fatalf("pools = %d, want 1", len(live.Inventory().Pools))
	}
	return live, c
}

// update writes next to the fake API and tells the Live, as the informer would.
func update(t *testing.T, c client.Client, live *inventory.Live, prev, next *corev1.Node) {
	t.Helper()
	status := next.Status // Update writes the spec and metadata, and reads the status back
	if err := c.Update(context.Background(), next); err != nil {
		t.Fatal(err)
	}
	next.Status = status
	if err := c.Status().Update(context.Background(), next); err != nil {
		t.Fatal(err)
	}
	live.Handler().OnUpdate(prev, next)
}

// GFD rewrites nvidia.com/gfd.timestamp on every GPU node once a minute: at
// 5,000 nodes, 83 changes a second. None of them changes a pool, and an
// admission must not rebuild on any of them.
func TestLiveDoesNotRebuildOnGFDTimestamp(t *testing.T) {
	n := gfdNode()
	live, c := liveOf(t, n)
	before := live.Inventory()
	next := n.DeepCopy()
	next.Labels["nvidia.com/gfd.timestamp"] = "1764240060"
	next.Status.Allocatable["cpu"] = resource.MustParse("95") // the kubelet's, not a GPU resource
	update(t, c, live, &n, next)
	if live.Inventory() != before {
		t.Fatal("the decision path rebuilt the inventory after a change of nvidia.com/gfd.timestamp and cpu only")
	}
	if live.Rebuild() != before {
		t.Error("the background rebuild rebuilt after a change of nvidia.com/gfd.timestamp and cpu only")
	}
}

// A change Build reads (a GPU taken out of allocatable) is built in the
// background: the decision path keeps the last inventory until then.
func TestAdmissionNeverRebuilds(t *testing.T) {
	n := gfdNode()
	live, c := liveOf(t, n)
	before := live.Inventory()
	next := n.DeepCopy()
	next.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("7")
	update(t, c, live, &n, next)
	for range 3 {
		if live.Inventory() != before {
			t.Fatal("Inventory() rebuilt on the admission path after a node change; only Rebuild (the background loop) may")
		}
	}
	after := live.Rebuild()
	if after == before || after.Pools[0].Allocatable["nvidia.com/gpu"] != 7 {
		t.Fatalf("Rebuild after the change: nvidia.com/gpu = %d, want 7 in a new inventory", after.Pools[0].Allocatable["nvidia.com/gpu"])
	}
	if live.Inventory() != after {
		t.Error("Inventory() does not return the rebuilt inventory")
	}
}

// A label Build does not read still decides which nodes a pod's
// nodeSelector allows: it reaches the inventory's nodes at once, without a
// rebuild.
func TestLiveSwapsInOtherLabelsWithoutRebuild(t *testing.T) {
	n := gfdNode()
	live, c := liveOf(t, n)
	before := live.Inventory()
	next := n.DeepCopy()
	next.Labels["team"] = "vision"
	update(t, c, live, &n, next)
	inv := live.Inventory()
	if inv != before {
		t.Fatal("a label only pods' node affinity reads rebuilt the inventory")
	}
	if got := inv.Pools[0].Nodes[0].Object().Labels["team"]; got != "vision" {
		t.Errorf("the node's affinity object has team=%q, want vision (a nodeSelector on it would miss the node)", got)
	}
	// And a rebuild keeps it.
	next2 := next.DeepCopy()
	next2.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("7")
	update(t, c, live, next, next2)
	if got := live.Rebuild().Pools[0].Nodes[0].Object().Labels["team"]; got != "vision" {
		t.Errorf("after a rebuild the node's affinity object has team=%q, want vision", got)
	}
}

// Start rebuilds once at once, then Debounce after a change, and not before.
func TestStartRebuildsAfterTheDebounce(t *testing.T) {
	n := gfdNode()
	c := fake.NewClientBuilder().WithObjects(&n).Build()
	clk := clocktesting.NewFakeClock(time.Now())
	lists := &countingReader{Reader: c}
	live := inventory.NewLive(lists, nil, logr.Discard())
	live.Clock, live.Debounce = clk, time.Second
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- live.Start(ctx) }()
	defer func() { cancel(); <-done }()
	// Wait for Start's own first build without calling Inventory(), which
	// would build first and leave Start's initial Rebuild to run after the
	// change below (and rebuild at once, rightly).
	waitUntil(t, "Start's first build", func() bool { return lists.n.Load() > 0 })
	before := live.Inventory() // waits for that build to finish
	if len(before.Pools) != 1 {
		t.Fatalf("pools = %d, want 1", len(before.Pools))
	}

	next := n.DeepCopy()
	next.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("7")
	update(t, c, live, &n, next)
	waitUntil(t, "the loop to wait on the debounce", clk.HasWaiters)
	if live.Inventory() != before {
		t.Fatal("rebuilt before the debounce passed")
	}
	clk.Step(time.Second)
	waitUntil(t, "the rebuild after the debounce", func() bool { return live.Inventory() != before })
	if got := live.Inventory().Pools[0].Allocatable["nvidia.com/gpu"]; got != 7 {
		t.Errorf("nvidia.com/gpu = %d after the rebuild, want 7", got)
	}
}

// countingReader counts List calls: each is one build of the inventory.
type countingReader struct {
	client.Reader
	n atomic.Int32
}

func (r *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	r.n.Add(1)
	return r.Reader.List(ctx, list, opts...)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
