package placement

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// kind is one kind of request of the target workload: what a pod takes of
// CPU and memory and, on each of gpus GPUs, the same item.
type kind struct {
	milliCPU, memoryMiB int64
	dra                 bool
	item
	gpus int
}

type weighted struct {
	kind
	weight float64
}

// kindOf is the kind of a pod's request. A pod that takes different items
// of several GPUs (containers with different shares) counts as its first
// item on each.
func kindOf(r request) kind {
	k := kind{milliCPU: r.milliCPU, memoryMiB: r.memoryMiB, dra: r.dra, gpus: len(r.items)}
	if len(r.items) > 0 {
		k.item = r.items[0]
	}
	return k
}

// kindsOf turns the args' workload into kinds, and those that name models
// into pinned kinds.
func kindsOf(ks []Kind) ([]weighted, []pinnedKind) {
	out := make([]weighted, 0, len(ks))
	var pinned []pinnedKind
	for _, k := range ks {
		w := weighted{kind: kind{milliCPU: k.CPU.MilliValue(), memoryMiB: k.Memory.Value() >> 20}, weight: k.Weight}
		switch {
		case k.GPUMemory != nil:
			w.dra, w.memory, w.gpus = true, k.GPUMemory.Value(), 1
		case k.Shares > 0:
			w.shares, w.gpus = k.Shares, 1
		case k.GPUs > 0:
			w.dra, w.whole, w.gpus = true, true, k.GPUs
		}
		out = append(out, w)
		if w.gpus > 0 {
			pinned = append(pinned, pinnedKind{counted: counted{kind: w.kind, pin: pin{models: spellModels(k.Models)}}, weight: k.Weight})
		}
	}
	return out, pinned
}

// task is kind k on a node of shape s, as fragmentation counts it: a kind
// of the other mode, or too large for the shape's GPUs, cannot run there.
func (k kind) task(s shape, weight float64) allocator.FragTask {
	t := allocator.FragTask{MilliCPU: k.milliCPU, MemoryMiB: k.memoryMiB, Weight: weight}
	if k.gpus == 0 {
		return t
	}
	t.GPUs, t.GPUMilli, t.Spec = k.gpus, allocator.MilliPerGPU, allocator.NodeModeDevicePlugin
	if k.dra {
		t.Spec = allocator.NodeModeDRA
	}
	if k.dra != s.dra || k.whole {
		return t
	}
	if take := s.take(k.item); take > 0 && take <= s.capacity {
		t.GPUMilli = s.milli(take)
	} else {
		t.Spec = "none"
	}
	return t
}

// pin is what narrows the GPU models a kind of pod accepts (see
// models.go): its node constraints, spelled (nodeConstraints), and the
// models its DRA requests accept (request.models). The zero pin accepts
// every model of its pool mode.
type pin struct {
	nodes, models string
}

// counted is a pod as the derived workload counts it: its kind and pin.
type counted struct {
	kind
	pin pin
}

// pinnedKind is a kind of the target workload with the models it accepts
// (its pin, and its node constraints to match nodes with) and its weight:
// what the scarcity price weighs against the supply.
type pinnedKind struct {
	counted
	match  *nodeaffinity.RequiredNodeAffinity // nil where pin.nodes is ""
	weight float64
}

// workload is the target workload: fixed by the args, or counted from the
// GPU pods of the profile that the scheduler's pod informer holds.
type workload struct {
	fixed       []weighted
	fixedPinned []pinnedKind // fixed's GPU kinds, with the models each accepts

	mu        sync.Mutex
	count     map[counted]int
	pods      map[types.UID]counted
	changes   int          // pods counted or forgotten since the last revision
	cycles    int          // snapshots taken since the last revision
	rev       uint64       // revision of kinds
	kinds     []weighted   // as of rev; nil before the first snapshot
	pinned    []pinnedKind // as of rev
	sharePods int          // the pods counted as of rev
	// ids numbers the kinds counted since the last revision (and at it);
	// now is, by that number, each kind's pods counted now, and then, as
	// of the revision: moved reads two arrays rather than two maps keyed
	// by a kind, which took up to a millisecond a cycle in the 1,213-node
	// replay. Each revision numbers afresh the kinds it counts, and drops
	// the rest.
	ids       map[counted]int32
	now, then []int64
	free      []int32 // numbers freed since the revision, above then's
	// quiet is how many changes since the last revision cannot have
	// moved the mix by refreshShare, going by the last time moved was
	// computed (see stillWithin).
	quiet int
	// match holds the node constraints of the pins counted, by pin.nodes.
	match map[string]*nodeaffinity.RequiredNodeAffinity

	// revised, where set, makes the revisions after the first in a
	// goroutine (reviseAsync), and is given each one it makes; the plugin
	// sets it for a derived workload.
	revised  func(rev uint64, kinds []weighted, pinned []pinnedKind)
	revising bool           // a revision is being made
	pending  sync.WaitGroup // the revision being made
}

func newWorkload() *workload {
	return &workload{count: map[counted]int{}, pods: map[types.UID]counted{}, ids: map[counted]int32{}, match: map[string]*nodeaffinity.RequiredNodeAffinity{}}
}

// refreshShare is how far the derived workload may move before snapshot
// publishes a new revision: at least that share of the pods counted (and
// one) must have come or gone, and the distribution of kinds must have
// moved by that much (moved). A revision makes every kept node score
// stale, to be computed afresh with an empty fragmentation memo (each
// placer set memoizes for one revision). At 1% the paced replay of
// gpuspec33 on 400 nodes revised the workload about 300 times in 2,550
// cycles, which made cycles compute 40 node scores on average where a
// fixed workload's computed 12, and the placement time's p99 was about
// twice as high. In the simulator, 5% packs as 1% does (gpuspec33 and
// gpuspec20, seeds 42–51, 400 and 1,213 nodes; docs/benchmarks.md,
// section 6). Kinds that differ only by the models they accept count
// apart here, so that pods pinned to a model in a new proportion revise
// the price, once the whole mix moved by 5%: a pinned kind that grows from
// 1% to 3% of the pods does not by itself.
const refreshShare = 0.05

// snapshot returns the workload's revision and kinds, most popular first.
func (w *workload) snapshot() (uint64, []weighted) {
	rev, kinds, _ := w.snapshotPinned(0)
	return rev, kinds
}

// snapshotPinned is snapshot with the revision's GPU kinds by the models
// they accept, taken by a scheduling cycle. A new revision is published
// only once spacing snapshots (cycles) were taken since the last one, as
// well as by refreshShare's rule. Each revision makes every kept node
// score stale, and spacing is as many cycles as the pods of one request
// take to refresh all of theirs (nodeStates.refreshCycles): without it a
// run of revisions (a cold start, where every pod moves the mix by more
// than refreshShare) made nearly every cycle refresh its most, with a memo
// emptied by each revision. In the simulator, spacing revisions so costs
// no packing (docs/benchmarks.md, section 6). New scarcity prices under
// one revision (placerCache) stale the scores too and are not spaced:
// they change only with the supply, when nodes or slices come or go.
//
// With revised set, a revision due after the first is computed by a
// goroutine of its own (reviseAsync), and the cycle that finds it due
// scores under the revision it has; the revision is published when it is
// made, for the cycles after. Counting, sorting and pricing the pods took
// about 0.4 ms of the cycle that revised in the 1,213-node replay; off
// the cycle, the same goroutine also warms the kept views under the new
// revision (docs/benchmarks.md, section 6, "Revisions off the cycle").
func (w *workload) snapshotPinned(spacing int) (uint64, []weighted, []pinnedKind) {
	if w.fixed != nil {
		return 0, w.fixed, w.fixedPinned
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cycles++
	if w.kinds != nil && (w.revising || float64(w.changes) < max(1, refreshShare*float64(len(w.pods))) || w.cycles < spacing || w.stillWithin()) {
		return w.rev, w.kinds, w.pinned
	}
	if w.kinds != nil && w.revised != nil {
		w.revising = true
		w.pending.Add(1)
		go w.reviseAsync()
		return w.rev, w.kinds, w.pinned
	}
	t := w.take()
	t.sort()
	return w.publish(t)
}

// reviseAsync makes a revision and publishes it, then hands it to revised
// (which makes its placer set and prices, so that the cycles after find
// them made, and warms the kept views under it), off the scheduling
// cycle; no other revision starts until revised returns. The pods are
// counted under the lock, sorted without it: pods counted or forgotten
// meanwhile count for the next revision, as they would had they come
// after it.
func (w *workload) reviseAsync() {
	defer w.pending.Done()
	start := time.Now()
	w.mu.Lock()
	t := w.take()
	w.mu.Unlock()
	t.sort()
	w.mu.Lock()
	rev, kinds, pinned := w.publish(t)
	w.mu.Unlock()
	w.revised(rev, kinds, pinned)
	// Only now may the next revision start: one started while this one's
	// set was warmed (which yields) would warm alongside it, on views
	// whose bases the later set makes anew (found in review).
	w.mu.Lock()
	w.revising = false
	w.mu.Unlock()
	revisionDuration.Observe(time.Since(start).Seconds())
}

// taken is the pods counted as a revision takes them: each counted kind
// with its pods as weight, and, once sorted, the kinds merged by their
// pins, both in compareKinds' order.
type taken struct {
	pinned  []pinnedKind
	kinds   []weighted
	pods    int // the pods counted
	changes int // workload.changes when taken
}

// take counts the pods for a revision. The caller holds w.mu.
func (w *workload) take() *taken {
	t := &taken{pinned: make([]pinnedKind, 0, len(w.count)), pods: len(w.pods), changes: w.changes}
	for c, n := range w.count {
		t.pinned = append(t.pinned, pinnedKind{counted: c, match: w.match[c.pin.nodes], weight: float64(n)})
	}
	return t
}

// sort merges t's kinds by their pins and sorts both lists. Both orders
// are total (compareKinds reads every field of a kind; a counted kind is
// its kind and pin), so the sort's algorithm cannot change them, nor can
// the order the map gave the kinds in. The pinned kinds, about 120 bytes
// each, are sorted by index, so that the sort moves four bytes where it
// would move them.
func (t *taken) sort() {
	merged := map[kind]float64{}
	for _, p := range t.pinned {
		merged[p.kind] += p.weight
	}
	t.kinds = make([]weighted, 0, len(merged))
	for k, n := range merged {
		t.kinds = append(t.kinds, weighted{kind: k, weight: n})
	}
	slices.SortFunc(t.kinds, compareKinds)
	t.pinned = sortPinned(t.pinned)
}

// publish makes t the workload's new revision and returns it. The caller
// holds w.mu. The changes counted since t was taken stay counted, against
// t's distribution (then), and the kinds counted since are numbered after
// t's, as kinds new since the revision.
func (w *workload) publish(t *taken) (uint64, []weighted, []pinnedKind) {
	w.rev++
	w.kinds, w.pinned = t.kinds, t.pinned
	w.changes, w.cycles, w.quiet = w.changes-t.changes, 0, 0
	w.sharePods = t.pods
	clear(w.ids)
	w.now, w.then, w.free = w.now[:0], make([]int64, 0, len(t.pinned)), w.free[:0]
	used := make(map[string]bool, len(w.match))
	for _, p := range t.pinned { // in a fixed order, as the numbers are
		w.ids[p.counted] = int32(len(w.now))
		w.now = append(w.now, int64(w.count[p.counted]))
		w.then = append(w.then, int64(p.weight))
		used[p.pin.nodes] = true
	}
	for c, n := range w.count { // counted since t was taken
		used[c.pin.nodes] = true
		if _, ok := w.ids[c]; !ok {
			w.ids[c] = int32(len(w.now))
			w.now = append(w.now, int64(n))
		}
	}
	for key := range w.match { // forget the constraints no pod counted has
		if !used[key] {
			delete(w.match, key)
		}
	}
	return w.rev, w.kinds, w.pinned
}

// wait waits for the revision being made, if any (tests).
func (w *workload) wait() { w.pending.Wait() }

// moved is how far the pods counted now are from the revision's
// distribution: the total variation distance between the two, the share of
// pods that would have to change kind to turn one into the other. Pods
// that keep coming in the revision's proportions move it by nothing, so a
// steady stream of one template does not revise the workload (and start
// every kept score afresh). With no pods counted now or at the revision,
// 1. It is summed in integers, N·R times the distance (N pods now, R at
// the revision), so that it is one number whatever the maps' order: a mix
// moved by exactly refreshShare revises or not on every run alike.
func (w *workload) moved() float64 {
	n, r := int64(len(w.pods)), int64(w.sharePods)
	if n == 0 || r == 0 {
		return 1
	}
	var d int64
	for id, c := range w.now {
		var t int64 // a kind new since the revision has none then
		if id < len(w.then) {
			t = w.then[id]
		}
		d += abs(c*r - t*n)
	}
	return float64(d) / float64(2*n*r)
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// stillWithin is moved() < refreshShare, computed only when enough pods
// came or went since it was last computed to have moved the mix that far.
// moved reads every kind counted (hundreds, by map: about a third of the
// placement time per cycle in the 1,213-node replay, where, once enough
// pods changed and enough cycles passed, every cycle computed it until the
// mix moved). One pod added, removed or changed in kind moves the mix
// (total variation distance) by at most 1/N, N the pods counted before it,
// so after k changes from a mix at m with N pods it is at most
// m + k/(N−k+1): below refreshShare while k < (refreshShare−m)(N+1)/
// (1+refreshShare−m). quiet keeps a k short of that (with N−1 for N+1), so
// a revision comes at the same cycle as when moved was computed every time.
func (w *workload) stillWithin() bool {
	if w.changes < w.quiet {
		return true
	}
	m := w.moved()
	if m >= refreshShare {
		return false
	}
	gap, n := refreshShare-m, float64(len(w.pods))
	w.quiet = w.changes + int(math.Floor(gap*(n-1)/(1+gap)))
	return true
}

// compareKinds orders kinds by weight, largest first, then by every field,
// so that the order of summing (and so the fragmentation, to the last bit)
// never depends on map iteration. It is 0 only for the same kind and
// weight. It compares no further than the first field that differs: a
// revision sorts hundreds of kinds, and comparing every field of every
// pair (cmp.Or's arguments are all evaluated) was most of the revision's
// time in the 1,213-node replay.
func compareKinds(a, b weighted) int {
	return compareWeighted(&a.kind, a.weight, &b.kind, b.weight)
}

// compareWeighted is compareKinds' order of kind a of weight aw and kind b
// of weight bw.
func compareWeighted(a *kind, aw float64, b *kind, bw float64) int {
	if aw != bw {
		return cmp.Compare(bw, aw)
	}
	switch {
	case a.milliCPU != b.milliCPU:
		return cmp.Compare(b.milliCPU, a.milliCPU)
	case a.memoryMiB != b.memoryMiB:
		return cmp.Compare(b.memoryMiB, a.memoryMiB)
	case a.gpus != b.gpus:
		return cmp.Compare(b.gpus, a.gpus)
	case a.dra != b.dra:
		return trueFirst(a.dra, b.dra)
	case a.whole != b.whole:
		return trueFirst(a.whole, b.whole)
	case a.shares != b.shares:
		return cmp.Compare(b.shares, a.shares)
	}
	return cmp.Compare(b.memory, a.memory)
}

// sortPinned returns pinned in compareKinds' order of their kinds and
// weights, then by their pins.
func sortPinned(pinned []pinnedKind) []pinnedKind {
	order := make([]int32, len(pinned))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(i, j int32) int {
		a, b := &pinned[i], &pinned[j]
		if c := compareWeighted(&a.kind, a.weight, &b.kind, b.weight); c != 0 {
			return c
		}
		if a.pin.nodes != b.pin.nodes {
			return strings.Compare(a.pin.nodes, b.pin.nodes)
		}
		return strings.Compare(a.pin.models, b.pin.models)
	})
	out := make([]pinnedKind, len(pinned))
	for i, k := range order {
		out[i] = pinned[k]
	}
	return out
}

// trueFirst orders true before false.
func trueFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// set records pod uid's kind and pin (ok) or forgets the pod (!ok); match
// is the node constraints of a pin that has some.
func (w *workload) set(uid types.UID, k counted, match *nodeaffinity.RequiredNodeAffinity, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	old, had := w.pods[uid]
	if had && ok && old == k || !had && !ok {
		return
	}
	if had {
		if w.count[old]--; w.count[old] == 0 {
			delete(w.count, old)
		}
		id := w.ids[old]
		// A kind new since the revision that no pod has any more adds
		// nothing to moved: its number is freed, so that kinds that come
		// and go between revisions do not grow the arrays.
		if w.now[id]--; w.now[id] == 0 && int(id) >= len(w.then) {
			delete(w.ids, old)
			w.free = append(w.free, id)
		}
		delete(w.pods, uid)
	}
	if ok {
		w.pods[uid] = k
		w.count[k]++
		id, known := w.ids[k]
		if !known {
			if n := len(w.free); n > 0 {
				id, w.free = w.free[n-1], w.free[:n-1]
			} else {
				id = int32(len(w.now))
				w.now = append(w.now, 0)
			}
			w.ids[k] = id
		}
		w.now[id]++
		if _, known := w.match[k.pin.nodes]; !known && match != nil {
			w.match[k.pin.nodes] = match
		}
	}
	w.changes++
}

// podHandler keeps a derived workload in step with the pod informer: a pod
// of profile counts once its GPU request can be read (a claim made from a
// template is there only after the pod's status names it), and stops
// counting when it ends or is deleted. The scheduler's pod informer leaves
// out pods that ended already.
func (w *workload) podHandler(profile string, claims claimGetter) cache.ResourceEventHandler {
	update := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		if pod.Spec.SchedulerName != profile || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			w.set(pod.UID, counted{}, nil, false)
			return
		}
		r, err := readAsked(pod, claims)
		if err != nil {
			return // counted once its claims are there
		}
		if !r.gpu() {
			w.set(pod.UID, counted{}, nil, false)
			return
		}
		c := counted{kind: kindOf(r), pin: pin{nodes: nodeConstraints(pod), models: r.models}}
		var match *nodeaffinity.RequiredNodeAffinity
		if c.pin.nodes != "" {
			m := nodeaffinity.GetRequiredNodeAffinity(pod)
			match = &m
		}
		w.set(pod.UID, c, match, true)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    update,
		UpdateFunc: func(_, obj any) { update(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				w.set(pod.UID, counted{}, nil, false)
			}
		},
	}
}

// placerSet holds, for one revision of the workload, the scorers whose
// placers memoize fragmentation. A placer's memo is not safe for
// concurrent use, so each goroutine scoring nodes takes a scorer of its
// own and gives it back; scorers live on across cycles while the workload
// does not change. They are kept in a list, not a sync.Pool: a pool drops
// what it holds at every other garbage collection, which in a scheduler
// holding a cluster's objects comes every few cycles, and every pass
// over the nodes after one began with empty memos.
type placerSet struct {
	rev   uint64
	kinds []weighted
	total float64
	// prices is the scarcity price per milli-GPU of each GPU model (see
	// scarcity.go); nil prices none.
	prices map[string]float64

	// of is the set this one reprices (repriced), whose scorers it
	// shares; nil for a set of its own.
	of *placerSet
	// background is true for a set made off the scheduling cycle, by the
	// goroutine that made its revision (workload.reviseAsync).
	background bool

	mu   sync.Mutex
	free []*scorer // at most maxHelpers+1: the goroutines of one cycle
}

// repriced is s under new prices: its revision, kinds and scorers, with
// the fragmentation they memoized, which prices do not change.
func (s *placerSet) repriced(prices map[string]float64) *placerSet {
	of := s
	if s.of != nil {
		of = s.of
	}
	return &placerSet{rev: s.rev, kinds: s.kinds, total: s.total, prices: prices, of: of, background: s.background}
}

func newPlacerSet(rev uint64, kinds []weighted) *placerSet {
	s := &placerSet{rev: rev, kinds: kinds}
	for _, k := range kinds {
		s.total += k.weight
	}
	return s
}

// get takes a scorer of the set: one given back, or a new one.
func (s *placerSet) get() *scorer {
	if s.of != nil {
		return s.of.get()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.free); n > 0 {
		c := s.free[n-1]
		s.free = s.free[:n-1]
		return c
	}
	return &scorer{set: s, placers: map[shape]*allocator.Placer{}}
}

// put gives c back.
func (s *placerSet) put(c *scorer) {
	if s.of != nil {
		s.of.put(c)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.free) <= maxHelpers {
		s.free = append(s.free, c)
	}
}

// scorer scores nodes for one goroutine at a time.
type scorer struct {
	set     *placerSet
	placers map[shape]*allocator.Placer
	search  search // predict's buffers (scoreChoices)
}

// placer is the placement cost on nodes of shape sh.
func (c *scorer) placer(sh shape) *allocator.Placer {
	if p, ok := c.placers[sh]; ok {
		return p
	}
	tasks := make([]allocator.FragTask, len(c.set.kinds))
	for i, k := range c.set.kinds {
		tasks[i] = k.task(sh, k.weight/c.set.total)
	}
	p := allocator.NewPlacer(tasks)
	p.Limit = scorerMemoLimit
	c.placers[sh] = p
	return p
}

// scorerMemoLimit bounds each scorer's fragmentation memo: a placer set
// keeps a scorer per goroutine of a cycle (16 at most), and
// under a workload that is not revised (fixed by the args, or a cluster
// whose pods do not change) a memo only grows. 32,768 states are about
// 2.6 MB a scorer, 42 MB for 16, inside the Deployment's 512 Mi limit;
// the default (a million states, 80 MB each) could pass a gigabyte. The
// states worth keeping are the few that many nodes share (idle nodes of a
// kind), which a small memo holds as well.
const scorerMemoLimit = 1 << 15
