package handover

import (
	"fmt"
	"maps"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

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
// gpuadmit-scheduler's Lease.
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
	return o.others() == p.others() && maps.Equal(o.normalized().Pools, p.normalized().Pools)
}

func (o Owners) others() State {
	if o.Others == "" {
		return Stock
	}
	return o.Others
}

// normalized drops the pools whose state is Others anyway.
func (o Owners) normalized() Owners {
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
	n := o.normalized()
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
	n := o.normalized()
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
