package agent

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestKubeletRestartReregisters restarts the kubelet (its socket and the
// plugin's removed, its socket created again) and expects the plugin to
// register again and serve the new kubelet.
func TestKubeletRestartReregisters(t *testing.T) {
	h := newHarness(t, 2)
	_, _, _ = h.start(nil)
	for round := range 2 {
		h.kubelet.restart()
		m := h.kubelet.registered(context.Background())
		if got := len(m.healthOf()); got != 2*unitsPerH100 {
			t.Errorf("round %d: the new kubelet sees %d devices, want %d", round, got, 2*unitsPerH100)
		}
		if _, err := m.allocate(context.Background(), "after/restart", 4); err != nil {
			t.Errorf("round %d: allocating after the restart: %v", round, err)
		}
	}
}

// everyDevice is every device ID of the harness's GPUs.
func everyDevice(h *harness) []string {
	var out []string
	for _, g := range h.gpus {
		for n := range unitsPerH100 {
			out = append(out, DeviceID(g.uuid, n))
		}
	}
	return out
}

// TestAgentRestartRecoversDevicesInUse allocates a pod, restarts the agent,
// and offers the new agent every device: it must know, from the kubelet's
// PodResources, which are in use, prefer none of them, and best-fit around
// them. An agent that cannot ask the kubelet would prefer them, which is
// what the control case shows.
func TestAgentRestartRecoversDevicesInUse(t *testing.T) {
	h := newHarness(t, 2)
	_, m, stop := h.start(h.lister)
	ctx := context.Background()
	a, err := m.allocate(ctx, "a/main", 60)
	if err != nil {
		t.Fatal(err)
	}
	h.pods.record("a", a)
	stop()

	_, m, _ = h.start(h.lister)
	got, err := m.prefer(ctx, everyDevice(h), nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range got {
		if slices.Contains(a.ids, id) {
			t.Errorf("after a restart the agent prefers %s, which pod a holds", id)
		}
		if uuid, _, _ := ParseDeviceID(id); uuid != "GPU-h100-0" {
			t.Errorf("preferred %s; best fit is GPU-h100-0, with 19 units free", id)
		}
	}

	_, blind, _ := startBlind(t, h)
	got, err = blind.prefer(ctx, everyDevice(h), nil, 10)
	if err != nil || !slices.ContainsFunc(got, func(id string) bool { return slices.Contains(a.ids, id) }) {
		t.Errorf("control: an agent without PodResources preferred %v, %v; want some of pod a's devices", got, err)
	}
}

// startBlind starts a second agent without PodResources on a fresh
// device-plugin directory of the same node.
func startBlind(t *testing.T, h *harness) (*Agent, *deviceManager, func()) {
	blind := *h
	blind.dir = t.TempDir()
	blind.kubelet = startKubelet(t, blind.dir)
	return blind.start(nil)
}

// TestFinishedPodsFreeTheirDevices ends the recovered pod: after a resync,
// its devices are preferable again.
func TestFinishedPodsFreeTheirDevices(t *testing.T) {
	h := newHarness(t, 1)
	h.pods.record("a", container{name: "main", ids: everyDevice(h)[:70]})
	_, m, _ := h.start(h.lister)
	ctx := context.Background()
	if _, err := m.prefer(ctx, everyDevice(h), nil, 10); err == nil {
		t.Fatal("10 units preferred on a GPU with 9 free")
	}
	h.pods.mu.Lock()
	h.pods.pods = nil
	h.pods.mu.Unlock()
	h.clock.Step(allocationGrace + time.Minute) // a resync, past the grace of recovered devices
	eventually(t, "pod a's devices are free again", func() bool {
		_, err := m.prefer(ctx, everyDevice(h), nil, 70)
		return err == nil
	})
}

// listerFunc is a PodResourcesLister made of a function.
type listerFunc func() *podresourcesv1.ListPodResourcesResponse

func (f listerFunc) List(context.Context, *podresourcesv1.ListPodResourcesRequest, ...grpc.CallOption) (*podresourcesv1.ListPodResourcesResponse, error) {
	return f(), nil
}

// TestRefreshKeepsAllocationsTheKubeletHasNotListed: an Allocate that
// races with the kubelet's List is not forgotten, an old unlisted one is.
func TestRefreshKeepsAllocationsTheKubeletHasNotListed(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	var tr *tracker
	tr = newTracker(ResourceShare, listerFunc(func() *podresourcesv1.ListPodResourcesResponse {
		tr.allocated([]string{"GPU-a::1"}) // allocated while the kubelet answers
		return &podresourcesv1.ListPodResourcesResponse{}
	}), c)
	tr.allocated([]string{"GPU-a::0"})
	c.Step(2 * allocationGrace)
	if err := tr.refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if tr.inUse("GPU-a::0") || !tr.inUse("GPU-a::1") {
		t.Errorf("after a refresh: old unlisted in use %v (want false), racing one %v (want true)",
			tr.inUse("GPU-a::0"), tr.inUse("GPU-a::1"))
	}
}
