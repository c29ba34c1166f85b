package handover

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func lease(holder string, renewed time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: SchedulerName, Namespace: "gpuadmit-system"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15), RenewTime: &metav1.MicroTime{Time: renewed}}}
}

// TestLeaseLiveByLocalObservation: gpuadmit-scheduler counts as running
// while its Lease's record was seen to change within the lease duration by
// the observer's clock, whatever time the scheduler's clock wrote into
// renewTime, as client-go's leader election judges a lease; and not once
// it is stale, released or deleted.
func TestLeaseLiveByLocalObservation(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 24, 2, 0, 0, 0, time.UTC))
	l := NewLease(clk)
	h := l.Handler(nil)
	if l.Live() {
		t.Fatal("live before any Lease was seen")
	}
	// The scheduler's clock runs 40s behind ours: its renewTime looks 40s
	// old the moment it is written. A renewTime comparison calls it dead.
	behind := clk.Now().Add(-40 * time.Second)
	h.OnAdd(lease("gpuadmit-scheduler-7d9f_1", behind), false)
	if !l.Live() {
		t.Error("a Lease just seen, renewed by a clock 40s behind, does not count as live")
	}
	clk.SetTime(clk.Now().Add(10 * time.Second))
	h.OnUpdate(nil, lease("gpuadmit-scheduler-7d9f_1", behind.Add(10*time.Second)))
	clk.SetTime(clk.Now().Add(14 * time.Second))
	if !l.Live() {
		t.Error("a Lease seen renewed 14s ago (duration 15s) does not count as live")
	}
	// The same record again (an informer resync) is no sign of life.
	h.OnUpdate(nil, lease("gpuadmit-scheduler-7d9f_1", behind.Add(10*time.Second)))
	clk.SetTime(clk.Now().Add(2 * time.Second))
	if l.Live() {
		t.Error("a Lease unchanged for 16s (duration 15s), resynced meanwhile, still counts as live")
	}
	if until, _ := l.Expiry(); !until.Equal(clk.Now().Add(-time.Second)) {
		t.Errorf("Expiry = %v, want %v (seen 16s ago, duration 15s)", until, clk.Now().Add(-time.Second))
	}
	// The scheduler's clock runs 40s ahead: renewTime lies in our future.
	// A renewTime comparison keeps a dead scheduler live 40s too long.
	h.OnUpdate(nil, lease("gpuadmit-scheduler-7d9f_1", clk.Now().Add(40*time.Second)))
	clk.SetTime(clk.Now().Add(16 * time.Second))
	if l.Live() {
		t.Error("a Lease last seen to change 16s ago counts as live because its renewTime, by a clock 40s ahead, is in the future")
	}
	h.OnUpdate(nil, lease("", clk.Now())) // released on a clean shutdown
	if l.Live() {
		t.Error("a released Lease (no holder) counts as live")
	}
	h.OnUpdate(nil, lease("gpuadmit-scheduler-7d9f_2", clk.Now()))
	if !l.Live() || len(l.Running()) != 1 || l.Running()[0] != SchedulerName {
		t.Errorf("a new holder does not count as live: Running() = %v", l.Running())
	}
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Obj: lease("gpuadmit-scheduler-7d9f_2", clk.Now())})
	if l.Live() || l.Running() != nil {
		t.Error("a deleted Lease counts as live")
	}
}
