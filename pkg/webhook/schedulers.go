package webhook

import (
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// SchedulerName is gpuadmit-scheduler's name, the scheduler its profile
// serves and the Lease its leader renews (deploy/scheduler).
const SchedulerName = "gpuadmit-scheduler"

// schedulerLease tells whether gpuadmit-scheduler runs: its leader renewed
// its Lease within the lease's duration. Pools go to it by default only
// while it does (input.cluster.schedulers); when every replica is gone, new
// GPU pods go to the stock scheduler instead of waiting for one that does
// not come. Safe for concurrent use.
type schedulerLease struct {
	clk   clock.PassiveClock
	mu    sync.Mutex
	renew time.Time
	ttl   time.Duration
	held  bool
}

func newSchedulerLease(clk clock.PassiveClock) *schedulerLease { return &schedulerLease{clk: clk} }

// Live lists gpuadmit-scheduler while its leader holds a fresh Lease.
func (s *schedulerLease) Live() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.held || s.clk.Since(s.renew) > s.ttl {
		return nil
	}
	return []string{SchedulerName}
}

func (s *schedulerLease) set(l *coordinationv1.Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = l != nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" && l.Spec.RenewTime != nil
	if !s.held {
		return
	}
	s.renew = l.Spec.RenewTime.Time
	s.ttl = 15 * time.Second
	if l.Spec.LeaseDurationSeconds != nil {
		s.ttl = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
}

// Handler follows the Lease (the cache holds only it).
func (s *schedulerLease) Handler() toolscache.ResourceEventHandler {
	lease := func(obj any) *coordinationv1.Lease {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		l, _ := obj.(*coordinationv1.Lease)
		return l
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.set(lease(obj)) },
		UpdateFunc: func(_, obj any) { s.set(lease(obj)) },
		DeleteFunc: func(any) { s.set(nil) },
	}
}
