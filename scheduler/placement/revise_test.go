package placement

import (
	"fmt"
	"github.com/google/go-cmp/cmp"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// A revision due after the first is made off the cycle (revised set): the cycle
// that finds it due scores under the revision it has, and the revision,
// made by its goroutine and handed to revised, is what the cycles after
// it find, with the pods counted as a synchronous revision counts them.
func TestARevisionDueIsMadeOffTheCycle(t *testing.T) {
	w, small, large, add := twoKindWorkload()
	var handed []uint64
	w.revised = func(rev uint64, kinds []weighted, _ []pinnedKind) { handed = append(handed, rev) }
	add(100, small)
	first, _, _ := w.snapshotPinned(0) // the first revision: the cycle needs one
	if first == 0 || len(handed) != 0 {
		t.Fatalf("the first snapshot: revision %d, %v handed to revised; want one made in the cycle, none handed", first, handed)
	}
	add(20, large) // the mix moved by 1/6
	if r, kinds, _ := w.snapshotPinned(0); r != first || len(kinds) != 1 {
		t.Fatalf("the cycle that finds a revision due: revision %d with %d kinds, want %d kept", r, len(kinds), first)
	}
	w.wait()
	r, kinds, _ := w.snapshotPinned(0)
	if r == first || len(kinds) != 2 || kinds[1].kind != large || kinds[1].weight != 20 || len(handed) != 1 || handed[0] != r {
		t.Fatalf("the cycle after: revision %d (was %d), kinds %+v, %v handed to revised; want a new revision with 20 large, handed", r, first, kinds, handed)
	}
	sync := newWorkload()
	for uid, c := range w.pods {
		sync.set(uid, c, nil, true)
	}
	sync.snapshotPinned(0)
	if _, want, _ := sync.snapshotPinned(0); fmt.Sprint(want) != fmt.Sprint(kinds) {
		t.Errorf("the revision made off the cycle: kinds %+v, want %+v, the synchronous revision's", kinds, want)
	}
}

// Pods counted or forgotten while a revision is made count against it:
// changes since it was taken, how far the mix moved from it, and kinds
// new since it numbered after its own, freed when no pod has them.
func TestChangesWhileARevisionIsMadeCountForTheNext(t *testing.T) {
	w, small, large, add := twoKindWorkload()
	add(90, small)
	add(10, large)
	w.snapshotPinned(0)
	taken := w.take()
	odd := kind{milliCPU: 3000, gpus: 1}
	add(5, odd)                                            // a kind new since the take
	w.set(types.UID("0"), counted{}, nil, false)           // a small pod forgotten
	w.set(types.UID("1"), counted{kind: large}, nil, true) // a small pod turned large
	taken.sort()
	w.publish(taken)
	if w.changes != 7 || w.sharePods != 100 {
		t.Fatalf("after publishing: %d changes, %d pods at the revision; want the 7 since the take, 100", w.changes, w.sharePods)
	}
	// Now 104 pods: 88 small, 11 large, 5 odd, against 90/10/0 of 100.
	// N·R·distance = (|88·100−90·104| + |11·100−10·104| + |5·100|)/2 = 880/... summed as moved does.
	want := (abs(88*100-90*104) + abs(11*100-10*104) + abs(5*100-0))
	if got, w2 := w.moved(), float64(want)/float64(2*104*100); got != w2 {
		t.Errorf("moved %v, want %v: the distance from the revision's 90/10 to 88/11/5", got, w2)
	}
	arrays := len(w.now)
	for i := range 5 { // the odd pods go: their kind's number is freed
		w.set(types.UID(fmt.Sprint(100+i)), counted{}, nil, false)
	}
	for i := range 2 {
		w.set(types.UID(fmt.Sprint("new", i)), counted{kind: kind{milliCPU: 5000, gpus: 1}}, nil, true)
	}
	if len(w.now) != arrays {
		t.Errorf("a kind new since the revision that no pod has any more: the arrays grew from %d to %d, want its number reused", arrays, len(w.now))
	}
}

// A set made off the cycle (background) cost its first cycle nothing, so
// that cycle refreshes stale scores as any other does; a set the cycle
// made refreshes none.
func TestABackgroundSetRefreshesFromItsFirstCycle(t *testing.T) {
	nodes, scores := pricedNodes(t)
	for _, background := range []bool{false, true} {
		kept := nodeStates{refreshAtMost: 3}
		scores(&kept, newPlacerSet(1, onesKinds))
		set := newPlacerSet(2, threesKinds)
		set.background = background
		scores(&kept, set)
		fresh := 0
		for _, n := range nodes {
			if k, ok := kept.find(kept.m[n.Node().Name].slot, 0); ok && k.rev == 2 {
				fresh++
			}
		}
		if want := map[bool]int{false: 0, true: 3}[background]; fresh != want {
			t.Errorf("the first cycle under a set made off the cycle %v: %d scores refreshed, want %d", background, fresh, want)
		}
	}
}

// A cycle that took its snapshot before a revision was published and asks
// for its set after the revision's was made gets the newer set, not a set
// made for the older revision.
func TestAnOlderRevisionGetsTheNewerSet(t *testing.T) {
	pl := &Plugin{}
	var c placerCache
	newer := c.getFor(pl, 2, threesKinds, nil, true)
	if got := c.get(pl, 1, onesKinds, nil); got != newer {
		t.Errorf("revision 1 asked after revision 2's set was made: set of revision %d, want revision 2's", got.rev)
	}
	if c.sets != 1 {
		t.Errorf("%d sets made, want 1", c.sets)
	}
}

// warm makes every kept view's base under the new set, with the
// fragmentation a base made afresh has, and the scores computed after it
// are those of a plugin that never saw the nodes.
func TestWarmMakesTheBasesOfTheNewSet(t *testing.T) {
	nodes, scores := pricedNodes(t)
	kept := nodeStates{refreshAtMost: len(nodes)}
	scores(&kept, newPlacerSet(1, onesKinds))
	set := newPlacerSet(2, threesKinds)
	set.background = true
	kept.warm(set)
	fresh := newPlacerSet(2, threesKinds).get()
	rebased, differ := 0, 0
	for name, st := range kept.m {
		for _, v := range st.views {
			if v == nil {
				continue
			}
			if v.kept == nil || v.kept.rev != 2 {
				t.Errorf("%s: a view's base after warm: %+v, want one of set 2", name, v.kept)
				continue
			}
			rebased++
			want := fresh.placer(v.shape).Fragmentation(v.kept.fn)
			if v.kept.before != want {
				t.Errorf("%s: fragmentation before %v, want %v, set 2's", name, v.kept.before, want)
			}
			if want != newPlacerSet(1, onesKinds).get().placer(v.shape).Fragmentation(v.kept.fn) {
				differ++
			}
		}
	}
	if rebased < len(nodes)/2 || differ == 0 {
		t.Errorf("%d views rebased of %d nodes, %d whose fragmentation the sets tell apart: the test proves little", rebased, len(nodes), differ)
	}
	var never nodeStates
	if got, want := scores(&kept, set), scores(&never, newPlacerSet(2, threesKinds)); !cmp.Equal(got, want) {
		t.Errorf("scores after warm (-a plugin that never saw the nodes +warmed):\n%s", cmp.Diff(want, got))
	}
}
