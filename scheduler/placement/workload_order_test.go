package placement

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// everyField is the order a revision's kinds follow, spelled as comparing
// every field in turn: what compareKinds and sortPinned must keep while
// comparing no further than the first field that differs.
func everyField(a, b weighted) int {
	return cmp.Or(cmp.Compare(b.weight, a.weight), cmp.Compare(b.milliCPU, a.milliCPU), cmp.Compare(b.memoryMiB, a.memoryMiB),
		cmp.Compare(b.gpus, a.gpus), trueFirst(a.dra, b.dra), trueFirst(a.whole, b.whole), cmp.Compare(b.shares, a.shares),
		cmp.Compare(b.memory, a.memory))
}

// A revision orders its kinds, and its pinned kinds, as comparing every
// field in turn does, whatever fields tie: the order the fragmentation's
// sums follow, so that it decides to the last bit as before.
func TestRevisionOrderComparesEveryField(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	w := newWorkload()
	for i := range 3000 {
		k := counted{kind: kind{milliCPU: int64(rng.IntN(3) * 1000), memoryMiB: int64(rng.IntN(2)), gpus: rng.IntN(3), dra: rng.IntN(2) == 0,
			item: item{whole: rng.IntN(2) == 0, shares: int64(rng.IntN(2)), memory: int64(rng.IntN(3))}},
			pin: pin{nodes: []string{"", "a", "b"}[rng.IntN(3)], models: []string{"", "A100", "H100"}[rng.IntN(3)]}}
		w.set(types.UID(fmt.Sprint(i)), k, nil, true)
	}
	_, kinds, pinned := w.snapshotPinned(0)
	if len(kinds) < 100 || len(pinned) < 500 {
		t.Fatalf("%d kinds and %d pinned kinds: too few to tie", len(kinds), len(pinned))
	}
	want := slices.Clone(kinds)
	rng.Shuffle(len(want), func(i, j int) { want[i], want[j] = want[j], want[i] })
	slices.SortFunc(want, everyField)
	if !slices.Equal(kinds, want) {
		t.Errorf("kinds out of order:\n got %v\nwant %v", kinds[:10], want[:10])
	}
	wantPinned := slices.Clone(pinned)
	rng.Shuffle(len(wantPinned), func(i, j int) { wantPinned[i], wantPinned[j] = wantPinned[j], wantPinned[i] })
	slices.SortFunc(wantPinned, func(a, b pinnedKind) int {
		return cmp.Or(everyField(weighted{a.kind, a.weight}, weighted{b.kind, b.weight}),
			cmp.Compare(a.pin.nodes, b.pin.nodes), cmp.Compare(a.pin.models, b.pin.models))
	})
	for i := range pinned {
		if pinned[i].counted != wantPinned[i].counted || pinned[i].weight != wantPinned[i].weight {
			t.Fatalf("pinned kind %d: got %+v, want %+v", i, pinned[i].counted, wantPinned[i].counted)
		}
	}
}

// BenchmarkRevision457Kinds is a revision of the workload over as many
// kinds as the gpuspec33 list asks (457), pinned to seven models, and the
// pods of the 1,213-node replay: the work of the cycle that publishes it.
func BenchmarkRevision457Kinds(b *testing.B) {
	w := newWorkload()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 8000 {
		j := int(rng.ExpFloat64()*60) % 457 // a few kinds common, most rare
		k := counted{kind: kind{milliCPU: int64(1000 * (1 + j/7)), memoryMiB: int64(1024 * (j % 5)), gpus: 1 + j%2, dra: true,
			item: item{memory: int64(j%3) << 30}}, pin: pin{models: fmt.Sprint("m", j%7)}}
		w.set(types.UID(fmt.Sprint(i)), k, nil, true)
	}
	for b.Loop() {
		w.kinds = nil // the next snapshot publishes a revision
		w.snapshotPinned(0)
	}
}

// The placement time's histogram has a bucket at the 1 ms target, in order
// among the others: the share of cycles over the target is counted.
func TestPlacementBucketsHoldTheTarget(t *testing.T) {
	b := placementBuckets()
	if !slices.IsSorted(b) || !slices.Contains(b, placementTarget) || len(b) != 31 {
		t.Errorf("buckets %v: want 31, sorted, with %v among them", b, placementTarget)
	}
}
