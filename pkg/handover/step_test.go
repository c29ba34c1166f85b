package handover

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func waiting(pool, scheduler string, replaceable bool, name string) Waiting {
	return Waiting{Namespace: "team-a", Name: name, Pools: []string{pool}, Scheduler: scheduler, Replaceable: replaceable}
}

// TestNextHandsAPoolOverOnlyOnceTheOldOwnerHasNoPodWaiting: the owner
// state machine, step by step. A pool changes hands only when no pod of
// the old owner waits on it; the pods of a gpuadmit-scheduler that is gone
// are deleted (those with a controller), the stock scheduler's are left to
// be placed.
func TestNextHandsAPoolOverOnlyOnceTheOldOwnerHasNoPodWaiting(t *testing.T) {
	const stock = "default-scheduler"
	type want struct {
		owners  string
		deleted []string
	}
	tests := map[string]struct {
		cur     Owners
		live    bool
		waiting []Waiting
		want    want
	}{
		"no record, no scheduler: every pool is the stock scheduler's": {
			want: want{owners: "others=default-scheduler"},
		},
		"the scheduler comes: pools with no stock pod waiting go to it at once": {
			live: true,
			want: want{owners: "others=gpuadmit-scheduler"},
		},
		"the scheduler comes: a pool with stock pods waiting stays stock until they are placed": {
			live:    true,
			waiting: []Waiting{waiting("a100", stock, true, "s1"), waiting("t4", SchedulerName, true, "g1")},
			want:    want{owners: "a100=default-scheduler, others=gpuadmit-scheduler"},
		},
		"the stock pods of a100 are placed: a100 follows": {
			cur:  Owners{Others: Owned, Pools: map[string]State{"a100": Stock}},
			live: true,
			want: want{owners: "others=gpuadmit-scheduler"},
		},
		"the scheduler goes with pods waiting for it: their pools are released and those pods deleted": {
			cur:  Owners{Others: Owned},
			live: false,
			waiting: []Waiting{waiting("a100", SchedulerName, true, "g1"), waiting("a100", SchedulerName, true, "g2"),
				waiting("t4", SchedulerName, false, "bare")},
			want: want{owners: "a100=releasing, others=default-scheduler", deleted: []string{"g1", "g2"}},
		},
		"released pool, its pods gone: the stock scheduler takes it": {
			cur:  Owners{Others: Stock, Pools: map[string]State{"a100": Releasing}},
			live: false,
			want: want{owners: "others=default-scheduler"},
		},
		"released pool, a pod admitted on a stale cache appears: it is deleted too, the pool stays released": {
			cur:     Owners{Others: Stock, Pools: map[string]State{"a100": Releasing}},
			waiting: []Waiting{waiting("a100", SchedulerName, true, "late")},
			want:    want{owners: "a100=releasing, others=default-scheduler", deleted: []string{"late"}},
		},
		"a stock pool gets a gpuadmit-scheduler pod from a stale cache: deleted, the pool stays stock": {
			cur:     Owners{Others: Stock},
			waiting: []Waiting{waiting("a100", SchedulerName, true, "late"), waiting("a100", stock, true, "s1")},
			want:    want{owners: "others=default-scheduler", deleted: []string{"late"}},
		},
		"the scheduler comes back while a pool is released: the pool is its again, nothing deleted": {
			cur:     Owners{Others: Stock, Pools: map[string]State{"a100": Releasing}},
			live:    true,
			waiting: []Waiting{waiting("a100", SchedulerName, true, "g1")},
			want:    want{owners: "others=gpuadmit-scheduler"},
		},
		"the scheduler goes while a pool still drains stock pods: that pool simply stays stock": {
			cur:     Owners{Others: Owned, Pools: map[string]State{"a100": Stock}},
			waiting: []Waiting{waiting("a100", stock, true, "s1")},
			want:    want{owners: "others=default-scheduler"},
		},
		"the scheduler goes with a pod of DRA alternatives waiting on two pools: both are released, the pod deleted": {
			cur:     Owners{Others: Owned},
			waiting: []Waiting{{Name: "alt", Pools: []string{"a100", "h100"}, Scheduler: SchedulerName, Replaceable: true}},
			want:    want{owners: "a100=releasing, h100=releasing, others=default-scheduler", deleted: []string{"alt"}},
		},
		"the scheduler comes: a stock pod of DRA alternatives keeps both its pools stock": {
			live:    true,
			waiting: []Waiting{{Name: "alt", Pools: []string{"a100", "h100"}, Scheduler: stock, Replaceable: true}},
			want:    want{owners: "a100=default-scheduler, h100=default-scheduler, others=gpuadmit-scheduler"},
		},
		"a pod of DRA alternatives on an owned pool and a stock one: deleted, it could be placed beside the stock scheduler": {
			cur:     Owners{Others: Owned, Pools: map[string]State{"t4": Stock}},
			live:    true,
			waiting: []Waiting{{Name: "alt", Pools: []string{"a100", "t4"}, Scheduler: SchedulerName, Replaceable: true}, waiting("t4", stock, true, "s1")},
			want:    want{owners: "t4=default-scheduler, others=gpuadmit-scheduler", deleted: []string{"alt"}},
		},
		"owned pools with pods waiting for a live scheduler are left alone": {
			cur:     Owners{Others: Owned},
			live:    true,
			waiting: []Waiting{waiting("a100", SchedulerName, true, "g1")},
			want:    want{owners: "others=gpuadmit-scheduler"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			next, del := Next(tc.cur, tc.live, tc.waiting)
			got := want{owners: next.String()}
			for _, w := range del {
				got.deleted = append(got.deleted, w.Name)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("Next (-want +got):\n%s", diff)
			}
		})
	}
}
