package agent

import (
	"context"
	"slices"
	"testing"
)

// TestKubeletRestartReregisters restarts the kubelet (its socket and the
// plugin's removed, its socket created again) and expects the plugin to
// register again and serve the new kubelet.
func TestKubeletRestartReregisters(t *testing.T) {
	h := newHarness(t, 2)
	_, _, _ = h.start()
	for round := range 2 {
		h.kubelet.restart()
		m := h.kubelet.registered(context.Background())
		if got := len(m.healthOf()); got != 2*testShares {
			t.Errorf("round %d: the new kubelet sees %d devices, want %d", round, got, 2*testShares)
		}
		if _, err := m.allocate(context.Background(), "after/restart", 4); err != nil {
			t.Errorf("round %d: allocating after the restart: %v", round, err)
		}
	}
}

// TestEndedPodsDevicesAreUsedAtOnce fills a GPU, ends the pod, and asks for
// the whole GPU again at once: the kubelet offers the freed devices, and the
// plugin must prefer them (or at least not refuse). An agent that kept its
// own record of devices in use held them for a minute after the pod ended
// and failed GetPreferredAllocation, which fails the next pod's admission.
func TestEndedPodsDevicesAreUsedAtOnce(t *testing.T) {
	h := newHarness(t, 1)
	_, m, _ := h.start()
	ctx := context.Background()
	a, err := m.allocate(ctx, "a/main", testShares)
	if err != nil {
		t.Fatal(err)
	}
	h.kubelet.end("a")
	b, err := m.allocate(ctx, "b/main", testShares)
	if err != nil {
		t.Fatalf("the next pod, right after pod a ended: %v", err)
	}
	slices.Sort(a.ids)
	slices.Sort(b.ids)
	if !slices.Equal(a.ids, b.ids) {
		t.Errorf("pod b got %v, want pod a's devices %v", b.ids, a.ids)
	}
}

// TestPluginRestartKeepsTheKubeletsAllocations restarts the agent while a
// pod runs: the kubelet still holds the pod's devices (its checkpoint) and
// offers the new plugin only the others, so the next container goes beside
// the pod, best fit, on devices nobody holds.
func TestPluginRestartKeepsTheKubeletsAllocations(t *testing.T) {
	h := newHarness(t, 2)
	_, m, stop := h.start()
	ctx := context.Background()
	a, err := m.allocate(ctx, "a/main", 60)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	_, m, _ = h.start()
	b, err := m.allocate(ctx, "b/main", 10)
	if err != nil {
		t.Fatal(err)
	}
	if uuid := onGPU(t, b); uuid != "GPU-h100-0" {
		t.Errorf("after a restart the next container went to %s; best fit is GPU-h100-0, where pod a runs", uuid)
	}
	for _, id := range b.ids {
		if slices.Contains(a.ids, id) {
			t.Errorf("after a restart pod b got %s, which pod a holds", id)
		}
	}
}
