// Package poolowner is the record of the GPU pools gpuadmit-scheduler may
// own now, as gpuadmit's controller writes it (pkg/handover) and the
// webhook and gpuadmit-scheduler's plugin read it, and the pool a pod was
// placed on, as gpuadmit's decision record names it. It imports nothing of
// the project and only k8s.io/api, so that gpuadmit-scheduler's module can
// read the record without the webhook's dependencies.
package poolowner

import (
	"fmt"
	"maps"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// SchedulerName is gpuadmit-scheduler's name: the scheduler its profile
// serves and the Lease its leader renews (deploy/scheduler).
const SchedulerName = "gpuadmit-scheduler"

// State is what the record says of one pool.
type State string

const (
	// Owned: gpuadmit-scheduler may own the pool. The webhook gives it the
	// pool where the policy wants it to (by default, every pool).
	Owned State = SchedulerName
	// Stock: gpuadmit-scheduler may not own the pool; its pods go to the
	// stock scheduler, default-scheduler (or the owner the policy names).
	Stock State = corev1.DefaultSchedulerName
	// Releasing: gpuadmit-scheduler's Lease expired while pods wait for it
	// on the pool. The webhook admits no pod to the pool (its controller
	// creates it again a moment later), the Reconciler deletes the waiting
	// pods, and the pool becomes Stock once none is left, so that no pod of
	// the stock scheduler ever waits beside them.
	Releasing State = "releasing"
)

// ConfigMapName is the record's ConfigMap, in the namespace of
// gpuadmit-scheduler's Lease (gpuadmit-system as deployed).
const ConfigMapName = "gpuadmit-scheduler-pools"

const (
	otherKey   = "other-pools"
	poolPrefix = "pool."
)

// Owners is the record: the state of every pool, as the controller last
// wrote it. Pools holds the pools whose state differs from Others; a pool
// not named is in state Others. The zero value (no record written yet)
// gives every pool to the stock scheduler.
type Owners struct {
	Others State
	Pools  map[string]State
}

// Of is the pool's state.
func (o Owners) Of(pool string) State {
	if s, ok := o.Pools[pool]; ok {
		return s
	}
	if o.Others == "" {
		return Stock
	}
	return o.Others
}

// Equal reports whether o and p say the same of every pool.
func (o Owners) Equal(p Owners) bool {
	return o.others() == p.others() && maps.Equal(o.Normalized().Pools, p.Normalized().Pools)
}

func (o Owners) others() State {
	if o.Others == "" {
		return Stock
	}
	return o.Others
}

// Normalized is o with Others set (Stock for the zero record) and without
// the pools whose state is Others anyway.
func (o Owners) Normalized() Owners {
	out := Owners{Others: o.others(), Pools: map[string]State{}}
	for p, s := range o.Pools {
		if s != out.Others {
			out.Pools[p] = s
		}
	}
	return out
}

// String lists the record, for logs and Events.
func (o Owners) String() string {
	n := o.Normalized()
	parts := make([]string, 0, len(n.Pools)+1)
	for p, s := range n.Pools {
		parts = append(parts, p+"="+string(s))
	}
	sort.Strings(parts)
	return strings.Join(append(parts, "others="+string(n.Others)), ", ")
}

// Data is the record as the ConfigMap's data: other-pools, and pool.<name>
// for each pool whose state differs.
func (o Owners) Data() map[string]string {
	n := o.Normalized()
	data := map[string]string{otherKey: string(n.Others)}
	for p, s := range n.Pools {
		data[poolPrefix+p] = string(s)
	}
	return data
}

// Parse reads the record from the ConfigMap's data; nil data (no ConfigMap
// yet) is the zero record.
func Parse(data map[string]string) (Owners, error) {
	o := Owners{Pools: map[string]State{}}
	for k, v := range data {
		s := State(v)
		if s != Owned && s != Stock && s != Releasing {
			return Owners{}, fmt.Errorf("%s: %s=%q: want %s, %s or %s", ConfigMapName, k, v, Owned, Stock, Releasing)
		}
		switch {
		case k == otherKey:
			o.Others = s
		case strings.HasPrefix(k, poolPrefix) && len(k) > len(poolPrefix):
			o.Pools[strings.TrimPrefix(k, poolPrefix)] = s
		default:
			return Owners{}, fmt.Errorf("%s: key %q: want %s or %s<pool>", ConfigMapName, k, otherKey, poolPrefix)
		}
	}
	return o, nil
}

// Marks of gpuadmit's decision record (the annotation gpuadmit.io/decision,
// which pkg/mutate writes): the pool's name follows PoolMark, the policy
// revision follows RevisionMark, at the end. A pod placed by DRA
// alternatives, pinned to no pool, has AltPoolsMark instead of PoolMark,
// followed by every pool its alternatives may be allocated on, ", " apart.
const (
	PoolMark     = "; pool "
	AltPoolsMark = "; alternatives on pools "
	RevisionMark = "; revision "
)

// AnnotationDecision is gpuadmit's decision record on a pod.
const AnnotationDecision = "gpuadmit.io/decision"

// PoolOf is the pool gpuadmit's decision record on pod names, or "" when
// it has none.
func PoolOf(pod *corev1.Pod) string {
	text := pod.Annotations[AnnotationDecision]
	i := strings.LastIndex(text, RevisionMark)
	if i < 0 {
		return ""
	}
	head := text[:i]
	j := strings.LastIndex(head, PoolMark)
	if j < 0 {
		return ""
	}
	return head[j+len(PoolMark):]
}

// PoolsOf is every pool gpuadmit's decision record on pod lets it wait on:
// the pool of PoolOf, or the pools of its DRA alternatives; none when it
// has no record.
func PoolsOf(pod *corev1.Pod) []string {
	if p := PoolOf(pod); p != "" {
		return []string{p}
	}
	text := pod.Annotations[AnnotationDecision]
	i := strings.LastIndex(text, RevisionMark)
	if i < 0 {
		return nil
	}
	j := strings.LastIndex(text[:i], AltPoolsMark)
	if j < 0 {
		return nil
	}
	return strings.Split(text[j+len(AltPoolsMark):i], ", ")
}
