package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/clock"
)

// PodResourcesLister is the part of the kubelet's PodResources API the agent
// reads; podresourcesv1.PodResourcesListerClient satisfies it.
type PodResourcesLister interface {
	List(ctx context.Context, in *podresourcesv1.ListPodResourcesRequest, opts ...grpc.CallOption) (*podresourcesv1.ListPodResourcesResponse, error)
}

// allocationGrace is how long a device Allocate handed out counts as in use
// even when the kubelet does not list it: the kubelet records a container's
// devices only after Allocate returns, so a List racing with it misses them.
const allocationGrace = time.Minute

// tracker knows which devices are in use: those the kubelet lists for its
// pods, and those Allocate handed out since. Allocate and
// GetPreferredAllocation read and write it without a lock (sync.Map); a
// refresh drops what the kubelet no longer lists, so devices of finished
// pods become preferable again.
type tracker struct {
	resource string
	lister   PodResourcesLister // nil: only what Allocate saw
	clock    clock.PassiveClock
	used     sync.Map // device ID → time.Time it was last seen allocated
}

func newTracker(resource string, lister PodResourcesLister, c clock.PassiveClock) *tracker {
	return &tracker{resource: resource, lister: lister, clock: c}
}

// allocated records devices Allocate handed out.
func (t *tracker) allocated(ids []string) {
	now := t.clock.Now()
	for _, id := range ids {
		t.used.Store(id, now)
	}
}

// inUse reports whether a device is known to be in use.
func (t *tracker) inUse(id string) bool {
	_, ok := t.used.Load(id)
	return ok
}

// canRefresh reports whether the kubelet can be asked.
func (t *tracker) canRefresh() bool { return t.lister != nil }

// refresh replaces what is in use with what the kubelet lists, keeping
// allocations younger than allocationGrace. It is what recovers the devices
// in use after an agent restart.
func (t *tracker) refresh(ctx context.Context) error {
	if t.lister == nil {
		return nil
	}
	start := t.clock.Now()
	resp, err := t.lister.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return fmt.Errorf("list pod resources: %w", err)
	}
	listed := t.devicesOf(resp)
	t.used.Range(func(k, v any) bool {
		if !listed[k.(string)] && start.Sub(v.(time.Time)) > allocationGrace {
			t.used.CompareAndDelete(k, v) // fails, and keeps it, if re-allocated meanwhile
		}
		return true
	})
	for id := range listed {
		t.used.LoadOrStore(id, start)
	}
	return nil
}

// devicesOf returns the IDs of this resource's devices in a List answer.
func (t *tracker) devicesOf(resp *podresourcesv1.ListPodResourcesResponse) map[string]bool {
	out := map[string]bool{}
	for _, pod := range resp.GetPodResources() {
		for _, c := range pod.GetContainers() {
			for _, d := range c.GetDevices() {
				if d.GetResourceName() != t.resource {
					continue
				}
				for _, id := range d.GetDeviceIds() {
					out[id] = true
				}
			}
		}
	}
	return out
}
