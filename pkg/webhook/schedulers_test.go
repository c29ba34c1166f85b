package webhook

import (
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// TestSchedulerLiveWhileItsLeaderRenews: gpuadmit-scheduler counts as
// running while its leader's Lease is fresh, and not once it is stale,
// released or deleted, so that pools fall back to the stock scheduler.
func TestSchedulerLiveWhileItsLeaderRenews(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 24, 2, 0, 0, 0, time.UTC))
	s := newSchedulerLease(clk)
	h := s.Handler()
	lease := func(holder string, renewed time.Time) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: SchedulerName, Namespace: "gpuadmit-system"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15), RenewTime: &metav1.MicroTime{Time: renewed}}}
	}
	live := func() bool { return slices.Equal(s.Live(), []string{SchedulerName}) }
	if live() {
		t.Fatal("gpuadmit-scheduler counts as running before any Lease was seen")
	}
	h.OnAdd(lease("gpuadmit-scheduler-7d9f_1", clk.Now().Add(-5*time.Second)), false)
	if !live() {
		t.Error("a Lease renewed 5s ago (duration 15s) does not count as running")
	}
	clk.SetTime(clk.Now().Add(11 * time.Second))
	if live() {
		t.Error("a Lease last renewed 16s ago (duration 15s) still counts as running")
	}
	h.OnUpdate(nil, lease("gpuadmit-scheduler-7d9f_1", clk.Now()))
	if !live() {
		t.Error("a renewed Lease does not count as running")
	}
	h.OnUpdate(nil, lease("", clk.Now())) // released on a clean shutdown
	if live() {
		t.Error("a released Lease (no holder) counts as running")
	}
	h.OnUpdate(nil, lease("gpuadmit-scheduler-7d9f_2", clk.Now()))
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Obj: lease("gpuadmit-scheduler-7d9f_2", clk.Now())})
	if live() {
		t.Error("a deleted Lease counts as running")
	}
}
