package handover

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuadmit/gpuadmit/pkg/mutate"
)

// Waiting is a GPU pod that waits for a node: gpuadmit placed it on Pools
// (one pool, or every pool of its DRA alternatives), for the scheduler
// Scheduler, and it is bound to no node and not being deleted. It waits on
// each of its pools: a pool changes hands only once it waits on none.
type Waiting struct {
	Namespace, Name string
	UID             types.UID
	Pools           []string
	Scheduler       string
	// Replaceable: a controller (ReplicaSet, Job, StatefulSet…) owns the
	// pod and creates it again when it is deleted, decided anew for the
	// pool's owner now. Not a pod of a Kueue workload (label
	// kueue.x-k8s.io/podset): where gpuadmit decided the workload's
	// template, its pods come back with the template's scheduler, and a
	// Job counts each deleted pod against its backoffLimit; those pods are
	// left to wait (docs/scheduler-handover.md, limits).
	Replaceable bool
}

// WaitingOf is the pod as Next sees it, and false for a pod that waits for
// nothing: bound, being deleted, finished, or of no pool of gpuadmit's.
func WaitingOf(p *corev1.Pod) (Waiting, bool) {
	if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return Waiting{}, false
	}
	pools := mutate.PoolsOf(p)
	if len(pools) == 0 {
		return Waiting{}, false
	}
	return Waiting{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Pools: pools, Scheduler: p.Spec.SchedulerName,
		Replaceable: metav1.GetControllerOf(p) != nil && p.Labels[mutate.LabelKueuePodSet] == ""}, true
}

// waitingOn counts a pool's waiting pods by scheduler.
type waitingOn struct {
	ours       int // for gpuadmit-scheduler, replaceable
	oursBare   int // for gpuadmit-scheduler, not replaceable: nothing creates them again for another scheduler
	otherwhere int // for any other scheduler
}

// Next is the record that should follow cur, given whether
// gpuadmit-scheduler is live and the pods that wait, and the waiting pods
// to delete so that their controllers create them again for the pool's new
// owner. A pool changes hands only once the old owner has no pod waiting
// on it (the invariant: at no moment do two schedulers
// hold pending pods of one pool):
//
//   - live, Stock → Owned once no pod of another scheduler waits on the
//     pool. Those pods are the stock scheduler's, which runs: they are left
//     to be placed, not deleted, and until then new pods keep going to it;
//   - live, Releasing → Owned (gpuadmit-scheduler came back before its pods
//     were all replaced; no other scheduler's pod waits there, as the
//     webhook admitted none while Releasing), else Stock;
//   - not live, Owned → Releasing while gpuadmit-scheduler's controlled
//     pods wait on the pool, else Stock; Releasing → Stock once none is
//     left. Pods that cannot be replaced are not waited for: nothing would
//     ever replace them (the webhook gives gpuadmit-scheduler no bare pod,
//     so those are Kueue's and pods admitted before it refused bare ones).
//
// Pools the record does not name move together as Others; those with
// waiting pods that keep them from following are named until they can.
// Every waiting, replaceable pod of gpuadmit-scheduler on a pool the next
// record does not give it is deleted, whenever it was admitted: a webhook
// replica whose cache lagged may have admitted it after the change.
func Next(cur Owners, live bool, waiting []Waiting) (Owners, []Waiting) {
	on := map[string]*waitingOn{}
	for _, w := range waiting {
		for _, p := range w.Pools {
			c := on[p]
			if c == nil {
				c = &waitingOn{}
				on[p] = c
			}
			switch {
			case w.Scheduler != SchedulerName:
				c.otherwhere++
			case w.Replaceable:
				c.ours++
			default:
				c.oursBare++
			}
		}
	}
	next := Owners{Others: cur.Normalized().Others, Pools: maps.Clone(cur.Pools)}
	if next.Pools == nil {
		next.Pools = map[string]State{}
	}
	if live {
		turnOn(&next, on)
	} else {
		turnOff(&next, on)
	}
	next = next.Normalized()
	var del []Waiting
	for _, w := range waiting {
		if w.Scheduler == SchedulerName && w.Replaceable && slices.ContainsFunc(w.Pools, func(p string) bool { return next.Of(p) != Owned }) {
			del = append(del, w) // it may be placed on any of its pools
		}
	}
	return next, del
}

// turnOn moves the pools towards gpuadmit-scheduler.
func turnOn(next *Owners, on map[string]*waitingOn) {
	if next.Others != Owned {
		for p, c := range on {
			if _, named := next.Pools[p]; !named && c.otherwhere > 0 {
				next.Pools[p] = Stock
			}
		}
		next.Others = Owned
	}
	for p, s := range next.Pools {
		if s == Owned {
			continue
		}
		if c := on[p]; c == nil || c.otherwhere == 0 {
			next.Pools[p] = Owned
		} else {
			next.Pools[p] = Stock
		}
	}
}

// turnOff moves the pools away from a gpuadmit-scheduler that is gone.
func turnOff(next *Owners, on map[string]*waitingOn) {
	if next.Others == Owned {
		for p, c := range on {
			if _, named := next.Pools[p]; !named && c.ours > 0 {
				next.Pools[p] = Owned // Releasing below
			}
		}
		next.Others = Stock
	}
	for p, s := range next.Pools {
		if s == Stock {
			continue
		}
		if c := on[p]; c != nil && c.ours > 0 {
			next.Pools[p] = Releasing
		} else {
			next.Pools[p] = Stock
		}
	}
}
