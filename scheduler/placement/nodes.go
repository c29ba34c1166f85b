package placement

import (
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// nodeStates keeps what the plugin derived of each node from one cycle to
// the next: the node's GPU views and the raw scores of the requests scored
// on it. Building a node's DRA view (its slices parsed, its pods' claims
// read) is most of what scoring a node costs, about 7 µs, and between two
// cycles all nodes but the one the last pod went to are as they were.
//
// An entry is good while three things stand:
//   - the node's NodeInfo generation, which the scheduler's cache bumps
//     whenever a pod is added to the node (assumed, bound or seen), leaves
//     it, or the Node object changes. What a DRA node's claims hold changes
//     only with its pods: the pending allocation of a claim is made in the
//     Reserve of the cycle that assumed its pod, before the next cycle
//     reads it, and undone with the assumed pod forgotten;
//   - the count of changes to gpuadmit's ResourceSlices (any node's: they
//     change when an agent starts, rarely);
//   - for the scores, the numbering of requests (see reqs).
//
// A kept score is of the workload revision it was computed under. After a
// revision, a cycle computes afresh at most refreshAtMost of the stale
// scores it meets (the first in the cycle's node order) and uses the
// others with their fragmentation as it was, so that a revision costs no
// cycle a pass over every node: recomputing every score at once would
// cost the next pod of each request seen a pass over every node. The
// cycle that publishes a revision, where it paid for making it (the
// workload's snapshot and prices), refreshes none: in the first 2,944
// cycles of the 1,213-node replay, 14 of the 40 over 0.865 ms published
// a revision (docs/benchmarks.md, section 6). A derived workload's
// revisions after the first are made off the cycle (workload.reviseAsync),
// and the first cycle under one refreshes as the others do. The 5%
// of the pods that revises the workload moves a node's fragmentation by
// little, and until a request's scores are all fresh (after about
// nodes/refreshAtMost of its pods), nodes are compared under two close
// workloads. The scarcity prices can move far more, so a score is kept
// without them and every cycle adds its own (see kept). Revisions come at most
// once in refreshCycles cycles, the cycles one request's pods take to
// refresh all of its scores (with several requests interleaved, each
// refreshes only its own, so some stay stale longer). A node that
// changed, or a request new to it, is scored under the newest revision.
//
// PreScore holds mu for the whole cycle, so entries change in one cycle
// at a time; within it, each node's entry is touched by one goroutine.
type nodeStates struct {
	slices atomic.Uint64 // changes to gpuadmit's ResourceSlices
	// refreshAtMost bounds the stale scores computed afresh in one cycle;
	// 0 means refreshAtMostDefault.
	refreshAtMost int

	mu sync.Mutex
	// m holds the entries by node name; byNode, their slots by the Node
	// object a cycle's NodeInfo holds, so that a cycle finds an entry
	// without reading the node's name. The name (the Node object and the
	// string's bytes) and the name map's keys are memory the scheduler's
	// Filter has evicted from the caches by the time PreScore runs:
	// looking up by name was a fifth of PreScore's time in a profile of
	// the 1,213-node replay. A Node object is of one node (the informer
	// replaces it, never changes it), and NodeInfo copies (pod-group
	// preemption) hold the same one. byNode holds one object a node, the
	// last its entry was found by (nodeState.node): a new object (the
	// informer replaced it, or an extender decoded its own) takes the old
	// one's place.
	m      map[string]*nodeState
	byNode map[*corev1.Node]int32
	// hot is, by slot, what the per-node loop reads and writes of each
	// entry, in one array rather than in the entries, which were a cache
	// miss a node; states is, by slot, the entry, read only for the nodes
	// a cycle computes.
	hot    []hotState
	states []*nodeState
	cycles uint64 // PreScore calls, to forget nodes no longer seen
	// reqs numbers the requests scored, so that a node keeps its scores
	// by a number rather than by the request. When the numbering starts
	// over, every kept score ends with it.
	reqs map[reqKey]uint32
	// kept holds the scores kept, by request number and then by node slot
	// (nodeState.slot): a cycle reads one request's scores, node after
	// node, from one array in about the order of its slots, rather than
	// from an array of each node's own, which cost a cache miss a node
	// (the most of the per-node loop in the 1,213-node replay's profile).
	kept [][]kept
	// slots is how many slots were handed out; free, the slots of nodes
	// forgotten, handed out again first.
	slots int32
	free  []int32
	// ver numbers the entries' versions (hotState.ver); revHigh is the
	// high half of the workload revisions the kept scores are of. When
	// either would wrap, every kept score ends.
	ver     uint32
	revHigh uint32
	// ids numbers the node states met (see stateKey), so that a view,
	// which keeps its state's number (gpuView.id), is told alike to
	// another in a cycle by its number rather than by hashing its state
	// again: a cycle of a request new to the nodes meets every feasible
	// node. ids starts over, with a new idEpoch, when it holds more than
	// alikeAtMost states. alike is, by state number, the first node of
	// that state in the cycle that last met it: kept from one cycle to
	// the next and told apart by the cycle's number rather than cleared.
	ids     map[stateKey]int32
	idEpoch uint32
	alike   []alikeAt
	// models numbers the GPU models of the views scored (gpuView.modelNum,
	// from 1), so that a kept score names its node's model by number;
	// price is, by that number, the scarcity price of priceSet, the
	// placer set of the last cycle.
	models   map[string]uint32
	price    []float64
	priceSet *placerSet
	// missed and todo are a cycle's scratch too, kept so that a cycle
	// that computes many scores does not grow them afresh.
	missed []miss
	todo   []int
	// prev is the last cycle's nodes with their slots, in its order (cur,
	// the array the next list is written to). The scheduler hands
	// PreScore the feasible nodes in the order of its snapshot, from the
	// same start while it checks every node, so that a cycle's nodes are
	// mostly the last one's in the same order: a cycle finds a node's slot
	// a few steps on in prev, in an array it reads in order, before it
	// looks in byNode, a cache miss a node. A Node object in prev is the
	// node's until its slot is freed, which takes cycles without it.
	prev, cur []nodeSlot
	// computed is how many scores the last cycle computed; looked, for
	// how many nodes it looked in byNode.
	computed, looked int
}

type nodeState struct {
	// slices is the count of slice changes the entry is of (as its
	// hotState's).
	slices uint64

	// views are the node's device-plugin views, by share resource (nil
	// entries: the node has no such view); dra is its DRA view (draMade:
	// made, nil where it has none), the one nearly every cycle reads,
	// in a field of its own rather than by a map lookup.
	views   map[viewKey]*gpuView
	dra     *gpuView
	draMade bool

	// layout is the node's slices parsed (parsed: at all), at the count
	// of slice changes layoutAt: it outlives the entry's resets, which
	// come with the node's pods, not with its slices.
	layout   *layout
	parsed   bool
	layoutAt uint64

	// slot is the node's index in nodeStates.kept's arrays, in hot and
	// in states; node is the Node object byNode holds for it.
	slot int32
	node *corev1.Node
}

// hotState is what a cycle reads of every node's entry: the node's
// NodeInfo generation and count of slice changes the entry is of, the
// cycle that last scored it; ver, the version of the entry, new whenever
// the node changes (or the slot passes to another node): a score kept
// under another version is not the node's now; and cur, the node's score
// in cycle curCycle, for Score to look up.
//
// draID is the state number of the node's DRA view (its gpuView.id) and
// draModel the number of its model, as numbered in epoch draEpoch of
// nodeStates.ids (0: none numbered since the entry's last reset, which
// clears it with the view). A cycle that meets many nodes a request has
// no score for (a new request's first pass over every node) tells a node
// alike to an earlier one by these, in the array it reads anyway, without
// reading the node's entry and view, two cache misses a node. The struct
// is one 64-byte cache line.
type hotState struct {
	gen           int64
	slices        uint64
	seen          uint64
	cur, curCycle int64
	ver           uint32
	at            int32 // the node's index in the list of the cycle that last saw it (nodeStates.prev)
	draID         int32
	draEpoch      uint32
	draModel      uint32
}

// miss is a node whose score a cycle computes, or takes from an alike
// node's: its score and milli, as kept, and the number of its model. view
// is nil for a node told alike by its hotState alone.
type miss struct {
	n      fwk.NodeInfo
	slot   int32
	view   *gpuView
	copyOf int // the index in missed of an alike node whose score this one takes; -1 for none
	score  int64
	milli  int32
	model  uint32
}

// nodeSlot is a node's Node object and its entry's slot.
type nodeSlot struct {
	node *corev1.Node
	slot int32
}

// lookAhead is how many of the last cycle's nodes a cycle looks through
// for a node before it looks in byNode: a node infeasible for this pod
// but not for the last one is skipped.
const lookAhead = 8

// alikeAt is the node of a state met first in cycle cycle: its index in
// that cycle's missed.
type alikeAt struct {
	cycle uint64
	at    int
}

// kept is a score kept, the low half of the workload revision it is of
// (see nodeStates.revHigh) and the version of the node entry it was
// computed for; rev 0 (no revision's: the derived workload's first is 1, a
// fixed one's is taken as 1) marks none kept. The score is without the
// scarcity price (see scorer.score): milli is what its placement takes,
// model the number of the node's model (nodeStates.models), and a cycle
// adds the price of its own placer set (nodeStates.priced). A score kept
// from an earlier revision is stale in its fragmentation only, which 5%
// of the pods moves by little; the prices can move by far more (a model
// that pinned pods turn out to need goes from a few hundredths to 1 a
// milli-GPU), and nodes scored under two revisions' prices were compared
// as if one were cheap.
type kept struct {
	score int64
	rev   uint32
	ver   uint32
	milli int32
	model uint32
}

// find is the score kept for request req on the node of slot sl as it is
// now.
func (s *nodeStates) find(sl int32, req uint32) (kept, bool) {
	if int(req) < len(s.kept) && int(sl) < len(s.kept[req]) {
		if k := s.kept[req][sl]; k.rev != 0 && k.ver == s.hot[sl].ver {
			return k, true
		}
	}
	return kept{}, false
}

// keep keeps k for request req on the node of slot sl.
func (s *nodeStates) keep(sl int32, req uint32, k kept) {
	for int(req) >= len(s.kept) {
		s.kept = append(s.kept, nil)
	}
	row := s.kept[req]
	if int(sl) >= len(row) {
		row = slices.Grow(row, int(s.slots)-len(row))[:s.slots]
		s.kept[req] = row
	}
	k.ver = s.hot[sl].ver
	row[sl] = k
}

// reset makes st the entry of a node (new, or changed) at generation gen
// and slice count sliceGen: a new version, so that none of the scores kept
// in its slot counts, and no views.
// The cycle makes room for its resets before it numbers its request
// (score), so that the versions never wrap within one.
func (s *nodeStates) reset(st *nodeState, gen int64, sliceGen uint64) {
	s.ver++
	h := &s.hot[st.slot]
	h.gen, h.slices, h.ver, h.draEpoch = gen, sliceGen, s.ver, 0
	st.slices, st.views, st.dra, st.draMade = sliceGen, nil, nil, false
}

// warm makes, for every view kept whose base is of an earlier placer set,
// its base under set: the node's fragmentation before a pod, as it is,
// under set's workload. It runs off the cycle, after a revision made off
// the cycle (Plugin.New), so that the cycles that refresh stale scores
// after it (refreshAtMost each) find half of each score's work done. It
// holds the lock for warmPiece nodes at a time, and yields between them,
// so that a cycle waiting for the lock gets it between pieces: on one
// core, after one piece; on more, sync.Mutex does not queue its waiters,
// and a cycle may wait a few pieces, a millisecond at worst (the mutex's
// starvation mode). One warm runs at a time (workload.reviseAsync).
func (s *nodeStates) warm(set *placerSet) {
	sc := set.get()
	defer set.put(sc)
	s.mu.Lock()
	sts := make([]*nodeState, 0, len(s.m))
	for _, st := range s.m {
		sts = append(sts, st)
	}
	s.mu.Unlock()
	for i := 0; i < len(sts); i += warmPiece {
		s.mu.Lock()
		for _, st := range sts[i:min(i+warmPiece, len(sts))] {
			if s.states[st.slot] != st { // forgotten meanwhile
				continue
			}
			st.dra.rebase(sc)
			for _, v := range st.views {
				v.rebase(sc)
			}
		}
		s.mu.Unlock()
		runtime.Gosched()
	}
}

// warmPiece is how many nodes warm makes the bases of under one hold of
// the lock: at about 2 µs a node whose state no other shares, a piece
// holds it a little over 0.1 ms.
const warmPiece = 64

// forgetScores ends every score kept: the request numbering starts over
// and the versions with it.
func (s *nodeStates) forgetScores() {
	s.reqs, s.kept, s.ver = map[reqKey]uint32{}, nil, 0
	for i := range s.hot {
		s.hot[i].ver = 0
	}
}

// slot hands out a slot for st, a new node's entry.
func (s *nodeStates) slot(st *nodeState) int32 {
	if n := len(s.free); n > 0 {
		sl := s.free[n-1]
		s.free = s.free[:n-1]
		s.hot[sl], s.states[sl] = hotState{}, st
		return sl
	}
	s.slots++
	s.hot, s.states = append(s.hot, hotState{}), append(s.states, st)
	return s.slots - 1
}

// viewKey names a device-plugin view of a node's GPUs: the units of a
// share resource.
type viewKey struct {
	res corev1.ResourceName
}

// reqKey is a request as a map key; requests of more items than it holds
// are scored afresh every time.
type reqKey struct {
	milliCPU, memoryMiB int64
	res                 corev1.ResourceName
	dra                 bool
	n                   int
	items               [8]item
	choices             string // request.choiceKey
}

func keyOf(r request) (reqKey, bool) {
	k := reqKey{milliCPU: r.milliCPU, memoryMiB: r.memoryMiB, res: r.shareResource, dra: r.dra, n: len(r.items), choices: r.choiceKey}
	if len(r.items) > len(k.items) {
		return k, false
	}
	copy(k.items[:], r.items)
	return k, true
}

// Bounds on what an entry and the cache keep.
const (
	// maxRequests is how many distinct requests are numbered before the
	// numbering (and every node's kept scores) starts over: a node keeps
	// a score for each, 24 bytes, so at most 24 KiB a node (30 MB at the
	// trace's 1,213 nodes). The openb default trace asks 151 distinct
	// requests, gpuspec33 457.
	maxRequests  = 1024
	forgetAfter  = 1024    // cycles after which a node not scored is forgotten
	parallelFrom = 64      // nodes computed with one scorer: a piece of the work spread over goroutines
	alikeFrom    = 16      // nodes to compute from which alike ones share a computation
	alikeAtMost  = 1 << 14 // states nodeStates.ids numbers before it starts over (about 3 MB)
	// refreshAtMostDefault is how many stale scores a cycle computes
	// afresh: at about 1 µs each, a tenth of a millisecond.
	refreshAtMostDefault = 128
)

// refresh is how many stale scores a cycle computes afresh at most.
func (s *nodeStates) refresh() int {
	if s.refreshAtMost <= 0 {
		return refreshAtMostDefault
	}
	return s.refreshAtMost
}

// refreshCycles is how many cycles it takes to refresh every score a
// revision makes stale, at refresh a cycle, for a cycle that scores nodes
// nodes: a revision stales the scores of every node kept, not only of the
// nodes feasible for this pod, so the larger of the two counts; and one
// more, the cycle that publishes the revision, which refreshes none where
// it made the revision (off the cycle it refreshes, and the count is one
// more than the fewest). It is
// the fewest cycles between two revisions of the workload
// (workload.snapshotPinned): without the publishing cycle counted, a
// cluster of 128 nodes or fewer could revise every cycle during a cold
// start and never refresh a score (found in review).
func (s *nodeStates) refreshCycles(nodes int) int {
	s.mu.Lock()
	kept := len(s.m)
	s.mu.Unlock()
	r := s.refresh()
	return (max(nodes, kept)+r-1)/r + 1
}

// score scores r on each of nodes: the score the node's entry keeps, or
// one computed (spread over goroutines, each with a scorer of its own)
// and kept. It returns the cycle, whose lookup Score
// calls: each node's hotState holds its score of this cycle, so a cycle
// builds no map of its own.
func (s *nodeStates) score(pl *Plugin, nodes []fwk.NodeInfo, r request, set *placerSet) *cycle {
	key, cacheable := keyOf(r)
	sliceGen := s.slices.Load()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*nodeState{}
	}
	if s.byNode == nil {
		s.byNode = map[*corev1.Node]int32{}
	}
	s.cycles++
	c := &cycle{states: s, n: int64(s.cycles)}
	rev := max(set.rev, 1)
	// Every kept score ends, before the request is numbered, when the
	// revisions' high half moves or this cycle's resets (one a node at
	// most) could wrap the versions.
	if high := uint32(rev >> 32); high != s.revHigh || uint64(s.ver)+uint64(len(nodes)) >= math.MaxUint32 {
		s.forgetScores()
		s.revHigh = high
	}
	req, cacheable := s.number(key, cacheable)
	refresh := s.refresh()
	if s.priceSet != nil && s.priceSet.rev != set.rev && !set.background {
		// The cycle that publishes a revision has made it (the workload's
		// snapshot, its prices): its stale scores wait for the next. A
		// revision made off the cycle (workload.reviseAsync) cost the
		// cycle nothing.
		refresh = 0
	}
	s.pricesOf(set)
	missed := s.missed[:0]
	defer func() { clear(missed); s.missed = missed[:0] }() // kept for the next cycle, holding no node
	prev, cur := s.prev, s.cur[:0]
	s.looked = 0
	at := 0 // where in prev the next node is looked for first
	for i, n := range nodes {
		node := n.Node()
		sl, inPrev, made := int32(0), false, false
		for d := range min(lookAhead, len(prev)) {
			k := at + d // the walk wraps, as a rotated list does
			if k >= len(prev) {
				k -= len(prev)
			}
			if prev[k].node == node {
				sl, inPrev, at = prev[k].slot, true, k+1
				break
			}
		}
		if !inPrev {
			s.looked++
			var found bool
			if sl, found = s.byNode[node]; !found {
				sl, made = s.byName(node)
			}
		}
		cur = append(cur, nodeSlot{node: node, slot: sl})
		h := &s.hot[sl]
		// A node found in byNode that was in the last cycle's list too
		// moves the walk on to where it was there: after a rotation of
		// the list (the scheduler starts where it stopped when it checks
		// only some of the nodes), the nodes after it are found in prev
		// again.
		if !inPrev && !made && h.seen == s.cycles-1 && int(h.at) < len(prev) && prev[h.at].node == node {
			at = int(h.at) + 1
		}
		h.at = int32(i)
		if made || h.gen != n.GetGeneration() || h.slices != sliceGen {
			s.reset(s.states[sl], n.GetGeneration(), sliceGen)
		}
		h.seen = s.cycles
		if k, ok := s.find(sl, req); ok && cacheable {
			if k.rev == uint32(rev) || refresh == 0 {
				h.cur, h.curCycle = s.priced(k.score, k.milli, k.model), c.n
				continue
			}
			refresh--
		}
		missed = append(missed, miss{n: n, slot: sl})
	}
	clear(prev)
	s.prev, s.cur = cur, prev[:0]
	// Nodes alike score alike: of each state (see stateKey) one node is
	// computed, the others take its score. A packing scheduler leaves many
	// nodes idle, and the idle nodes of a type are alike.
	todo := s.todo[:0]
	defer func() { s.todo = todo[:0] }()
	dra := r.gpu() && r.dra // the request's view of a node is its DRA view (view)
	for j := range missed {
		m := &missed[j]
		m.copyOf = -1
		alike := len(missed) >= alikeFrom
		if h := &s.hot[m.slot]; alike && dra && h.draEpoch != 0 && h.draEpoch == s.startIDs() {
			// Numbered since the node last changed: as stateID would
			// tell, without the view.
			a := &s.alike[h.draID]
			m.model = h.draModel
			if a.cycle == s.cycles {
				m.copyOf = a.at
				continue
			}
			*a = alikeAt{cycle: s.cycles, at: j}
			alike = false
		}
		m.view = pl.view(m.n, r, s.states[m.slot])
		if m.view != nil {
			if m.view.modelNum == 0 {
				m.view.modelNum = s.modelNum(m.view.model)
			}
			m.model = m.view.modelNum
		}
		if alike {
			if id, ok := s.stateID(m.n, m.view); ok {
				if dra {
					h := &s.hot[m.slot]
					h.draID, h.draEpoch, h.draModel = id, s.idEpoch, m.model
				}
				a := &s.alike[id]
				if a.cycle == s.cycles {
					m.copyOf = a.at
					continue
				}
				*a = alikeAt{cycle: s.cycles, at: j}
			}
		}
		todo = append(todo, j)
	}
	// Pieces of parallelFrom nodes, each scored with one scorer taken from
	// the set and given back.
	piece := func(p int) {
		sc := set.get()
		for _, j := range todo[p*parallelFrom : min((p+1)*parallelFrom, len(todo))] {
			m := &missed[j]
			m.score, m.milli = pl.unpricedScore(sc, m.n, r, m.view)
		}
		set.put(sc)
	}
	spread((len(todo)+parallelFrom-1)/parallelFrom, piece)
	s.computed = len(todo)
	scoresComputed.Observe(float64(len(todo)))
	for j := range missed {
		m := &missed[j]
		if m.copyOf >= 0 { // an earlier node, computed
			m.score, m.milli = missed[m.copyOf].score, missed[m.copyOf].milli
		}
		if cacheable {
			s.keep(m.slot, req, kept{score: m.score, rev: uint32(rev), milli: m.milli, model: m.model})
		}
		h := &s.hot[m.slot]
		h.cur, h.curCycle = s.priced(m.score, m.milli, m.model), c.n
	}
	if s.cycles%forgetAfter == 0 {
		for name, st := range s.m {
			if s.cycles-s.hot[st.slot].seen >= forgetAfter {
				delete(s.m, name)
				s.free, s.states[st.slot] = append(s.free, st.slot), nil
				delete(s.byNode, st.node)
			}
		}
	}
	return c
}

// byName is the slot of the entry of the node whose object is node, found
// by name, or made (made: the caller resets it), and kept by node
// instead of the object it was kept by before.
func (s *nodeStates) byName(node *corev1.Node) (slot int32, made bool) {
	st := s.m[node.Name]
	if st == nil {
		st, made = &nodeState{}, true
		st.slot = s.slot(st)
		s.m[node.Name] = st
	}
	if st.node != nil {
		delete(s.byNode, st.node)
	}
	st.node = node
	s.byNode[node] = st.slot
	return st.slot, made
}

// maxHelpers bounds the goroutines that help a cycle score nodes: the
// scheduler's default parallelism, 16, less the cycle's own.
const maxHelpers = 15

// spread runs piece(0) … piece(pieces-1), the calling goroutine taking
// pieces itself while up to GOMAXPROCS-1 helpers take the others. The
// caller never waits idle while pieces are left: with the scheduler's
// parallelizer, which the caller only waits on, a cycle that had to score
// more than one piece handed its processor to whatever else was runnable
// and waited its turn behind it, about 0.8 ms in the replay (with one
// processor, pieces of 65 to 100 nodes took 1.1 ms, those of 31 to 64,
// 0.34 ms).
func spread(pieces int, piece func(int)) {
	helpers := min(pieces-1, runtime.GOMAXPROCS(0)-1, maxHelpers)
	if helpers <= 0 {
		for p := range pieces {
			piece(p)
		}
		return
	}
	var next atomic.Int64
	work := func() {
		for p := int(next.Add(1) - 1); p < pieces; p = int(next.Add(1) - 1) {
			piece(p)
		}
	}
	var wg sync.WaitGroup
	for range helpers {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

// cycle is what PreScore leaves for Score: the cycle whose scores the
// nodes' hotStates hold. Score calls of a cycle run after its PreScore and
// before the next cycle's (the scheduler runs its scheduling cycles one at
// a time), so they read byNode, m and hot without the lock.
type cycle struct {
	states *nodeStates
	n      int64
}

func (c *cycle) Clone() fwk.StateData { return c }

// lookup is n's score in cycle c; false for a node c did not score.
func (c *cycle) lookup(n fwk.NodeInfo) (int64, bool) {
	sl, ok := c.states.byNode[n.Node()]
	if !ok {
		st := c.states.m[n.Node().Name]
		if st == nil {
			return 0, false
		}
		sl = st.slot
	}
	if h := c.states.hot[sl]; h.curCycle == c.n {
		return h.cur, true
	}
	return 0, false
}

// number is the number of request key, numbering it if new.
func (s *nodeStates) number(key reqKey, cacheable bool) (uint32, bool) {
	if !cacheable {
		return 0, false
	}
	if id, ok := s.reqs[key]; ok {
		return id, true
	}
	if s.reqs == nil || len(s.reqs) >= maxRequests {
		s.forgetScores()
	}
	id := uint32(len(s.reqs))
	s.reqs[key] = id
	return id, true
}

// stateKey is what a node's score of a request depends on, besides the
// request and the workload: its view's shape and GPUs left, and the CPU
// and memory it has left (see base), and, for a prediction of
// alternatives, its model and free MIG devices. Nodes of more than 8 GPUs
// have none.
type stateKey struct {
	shape         shape
	cpu, mem      int64
	n             int
	left          [8]int64
	model, migKey string
}

func keyOfState(n fwk.NodeInfo, v *gpuView) (stateKey, bool) {
	if v == nil || len(v.left) > len(stateKey{}.left) {
		return stateKey{}, false
	}
	k := stateKey{shape: v.shape, n: len(v.left), model: v.model, migKey: v.migKey}
	k.cpu, k.mem = cpuMemLeft(n)
	copy(k.left[:], v.left)
	return k, true
}

// stateID is the number of the state of node n with view v (see ids);
// false for a node without one (no view, or more GPUs than a stateKey
// holds). v keeps it for as long as ids keeps its numbering: a view is
// of one state of its node, made anew when the node changes.
func (s *nodeStates) stateID(n fwk.NodeInfo, v *gpuView) (int32, bool) {
	if v == nil {
		return 0, false
	}
	s.startIDs()
	if v.idEpoch != s.idEpoch {
		v.id, v.idEpoch = -1, s.idEpoch
		if k, ok := keyOfState(n, v); ok {
			id, seen := s.ids[k]
			if !seen {
				id = int32(len(s.alike))
				s.ids[k] = id
				s.alike = append(s.alike, alikeAt{})
			}
			v.id = id
		}
	}
	return v.id, v.id >= 0
}

// startIDs starts the numbering of states over, in a new epoch, when ids
// holds alikeAtMost states (or none yet), and returns the epoch.
func (s *nodeStates) startIDs() uint32 {
	if s.ids == nil || len(s.ids) >= alikeAtMost {
		s.ids, s.alike = make(map[stateKey]int32, len(s.ids)), s.alike[:0]
		s.idEpoch++
	}
	return s.idEpoch
}

// unpricedScore is the placement score of r on n, whose view for r is v,
// without the scarcity price, scaled to Score's integers, or unscored
// where the plugin cannot model the node; and the milli-GPU the price is
// paid on (see scorer.score).
func (pl *Plugin) unpricedScore(sc *scorer, n fwk.NodeInfo, r request, v *gpuView) (int64, int32) {
	raw, milli, ok := sc.score(n, r, v)
	if !ok {
		return unscored, 0
	}
	return int64(math.Round(raw * scoreScale)), int32(milli)
}

// priced is a kept score with the scarcity price of the cycle's placer
// set (pricesOf) added.
func (s *nodeStates) priced(score int64, milli int32, model uint32) int64 {
	if score == unscored || milli == 0 {
		return score
	}
	return score - int64(math.Round(s.price[model]*float64(milli)*scoreScale))
}

// pricesOf makes price the prices of set, by model number.
func (s *nodeStates) pricesOf(set *placerSet) {
	if s.priceSet == set {
		return
	}
	s.priceSet = set
	s.price = s.price[:0]
	s.price = append(s.price, 0) // number 0: no model
	names := make([]string, len(s.models)+1)
	for m, num := range s.models {
		names[num] = m
	}
	for _, m := range names[1:] {
		s.price = append(s.price, set.prices[m])
	}
}

// modelNum numbers model, a GPU model of a view, from 1; its price is
// that of the cycle's placer set.
func (s *nodeStates) modelNum(model string) uint32 {
	if num, ok := s.models[model]; ok {
		return num
	}
	if s.models == nil {
		s.models = map[string]uint32{}
	}
	num := uint32(len(s.models) + 1)
	s.models[model] = num
	s.price = append(s.price, s.priceSet.prices[model])
	return num
}

// view is the node's GPUs as r's pool mode sees them; for a pod without
// GPU, whichever GPUs the node has. Views are kept in st.
func (pl *Plugin) view(n fwk.NodeInfo, r request, st *nodeState) *gpuView {
	if r.gpu() && !r.dra {
		return st.view(viewKey{res: r.shareResource}, func() *gpuView {
			return devicePluginView(n, pl.offers.get(n.Node()), r.shareResource)
		})
	}
	if !st.draMade {
		st.dra, st.draMade = pl.draView(n, st), true
	}
	if v := st.dra; v != nil || r.gpu() {
		return v
	}
	o := pl.offers.get(n.Node())
	if o == nil {
		return nil
	}
	res := corev1.ResourceName(o.offer.Resource)
	return st.view(viewKey{res: res}, func() *gpuView { return devicePluginView(n, o, res) })
}

// view is st's view k, made by build the first time.
func (st *nodeState) view(k viewKey, build func() *gpuView) *gpuView {
	if v, ok := st.views[k]; ok {
		return v
	}
	if st.views == nil {
		st.views = map[viewKey]*gpuView{}
	}
	v := build()
	st.views[k] = v
	return v
}
