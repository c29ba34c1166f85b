package handover

import (
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// defaultLeaseDuration is client-go's and kube-scheduler's default, used
// for a Lease that states none.
const defaultLeaseDuration = 15 * time.Second

// record is what a Lease says about its leader; a change of any part of it
// is a sign of life, as client-go's leader election compares the whole
// record (observedRawRecord), not renewTime alone.
type record struct {
	holder      string
	duration    time.Duration
	acquire     int64 // Unix nanoseconds: comparable, unlike time.Time's location
	renew       int64
	transitions int32
}

// Lease tells whether gpuadmit-scheduler runs: its Lease has a holder and
// its record changed within the lease's duration, by this process's clock.
// As in client-go's leader election (LeaderElector.isLeaseValid), the time
// that counts is when this process saw the record change, never the
// renewTime the leader wrote: the leader's clock may be skewed from ours,
// and a record first seen now counts as fresh for one duration. Safe for
// concurrent use.
type Lease struct {
	clk      clock.PassiveClock
	mu       sync.Mutex
	seen     record
	observed time.Time // when seen last changed, by clk
	present  bool
	onChange func()
}

// NewLease returns a Lease that has seen no record yet (not live).
func NewLease(clk clock.PassiveClock) *Lease { return &Lease{clk: clk} }

// Live reports whether gpuadmit-scheduler's leader holds a Lease observed
// to change within its duration.
func (l *Lease) Live() bool {
	_, live := l.Expiry()
	return live
}

// Expiry is when the Lease stops counting as live unless it changes again,
// by this process's clock, and whether it is live now.
func (l *Lease) Expiry() (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.present || l.seen.holder == "" {
		return time.Time{}, false
	}
	until := l.observed.Add(l.seen.duration)
	return until, l.clk.Now().Before(until)
}

// Running lists gpuadmit-scheduler while it is live, for
// input.cluster.schedulers.
func (l *Lease) Running() []string {
	if l.Live() {
		return []string{SchedulerName}
	}
	return nil
}

func (l *Lease) set(lease *coordinationv1.Lease) {
	l.mu.Lock()
	if lease == nil {
		l.present, l.seen = false, record{}
	} else if r := recordOf(lease); !l.present || r != l.seen {
		l.present, l.seen, l.observed = true, r, l.clk.Now()
	}
	f := l.onChange
	l.mu.Unlock()
	if f != nil {
		f()
	}
}

func recordOf(lease *coordinationv1.Lease) record {
	r := record{duration: defaultLeaseDuration}
	s := lease.Spec
	if s.HolderIdentity != nil {
		r.holder = *s.HolderIdentity
	}
	if s.LeaseDurationSeconds != nil {
		r.duration = time.Duration(*s.LeaseDurationSeconds) * time.Second
	}
	if s.AcquireTime != nil {
		r.acquire = s.AcquireTime.UnixNano()
	}
	if s.RenewTime != nil {
		r.renew = s.RenewTime.UnixNano()
	}
	if s.LeaseTransitions != nil {
		r.transitions = *s.LeaseTransitions
	}
	return r
}

// Handler follows the Lease from an informer whose cache holds only it.
// onChange, when set, is called after every event (the Reconciler uses it
// to look again).
func (l *Lease) Handler(onChange func()) toolscache.ResourceEventHandler {
	l.mu.Lock()
	l.onChange = onChange
	l.mu.Unlock()
	lease := func(obj any) *coordinationv1.Lease {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		le, _ := obj.(*coordinationv1.Lease)
		return le
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { l.set(lease(obj)) },
		UpdateFunc: func(_, obj any) { l.set(lease(obj)) },
		DeleteFunc: func(any) { l.set(nil) },
	}
}
