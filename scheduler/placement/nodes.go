package placement

import (
	"context"
	"math"
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
//   - for the scores, the workload revision they were computed under.
//
// PreScore holds mu for the whole cycle, so entries change in one cycle
// at a time; within it, each node's entry is touched by one goroutine.
type nodeStates struct {
	slices atomic.Uint64 // changes to gpuadmit's ResourceSlices

	mu     sync.Mutex
	m      map[string]*nodeState
	cycles uint64 // PreScore calls, to forget nodes no longer seen
	// reqs numbers the requests scored, so that a node keeps its scores
	// by a number rather than by the request; epoch counts the times the
	// numbering started over, which ends every node's scores.
	reqs  map[reqKey]uint32
	epoch uint64
}

type nodeState struct {
	gen    int64
	slices uint64
	seen   uint64 // the cycle that last scored the node

	views map[viewKey]*gpuView // nil entries: the node has no such view

	rev, epoch uint64
	scores     []int64 // by request number; notKept where none is kept
}

// notKept marks a request number without a kept score (unscored, the
// lowest score, is a score).
const notKept = math.MaxInt64

// find is the score kept for request req.
func (st *nodeState) find(req uint32) (int64, bool) {
	if int(req) < len(st.scores) && st.scores[req] != notKept {
		return st.scores[req], true
	}
	return 0, false
}

// keep keeps score for request req.
func (st *nodeState) keep(req uint32, score int64) {
	for int(req) >= len(st.scores) {
		st.scores = append(st.scores, notKept)
	}
	st.scores[req] = score
}

// viewKey names a view of a node's GPUs: its DRA devices (res empty), or
// the units of a device-plugin share resource.
type viewKey struct {
	dra bool
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
}

func keyOf(r request) (reqKey, bool) {
	k := reqKey{milliCPU: r.milliCPU, memoryMiB: r.memoryMiB, res: r.shareResource, dra: r.dra, n: len(r.items)}
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
	// a score for each, 8 bytes, so at most 8 KiB a node. The openb
	// default trace asks 151 distinct requests.
	maxRequests  = 1024
	forgetAfter  = 1024 // cycles after which a node not scored is forgotten
	parallelFrom = 64   // nodes computed with one scorer: a piece of the work spread over goroutines
)

// score returns the score of r on each of nodes: the cached one
// where the node's entry holds it, computed (on the scheduler's
// parallelizer, each goroutine with a scorer of its own) elsewhere.
func (s *nodeStates) score(ctx context.Context, pl *Plugin, nodes []fwk.NodeInfo, r request, set *placerSet) map[fwk.NodeInfo]int64 {
	key, cacheable := keyOf(r)
	sliceGen := s.slices.Load()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*nodeState{}
	}
	s.cycles++
	req, cacheable := s.number(key, cacheable)
	out := make(map[fwk.NodeInfo]int64, len(nodes))
	var missed []int
	states := make([]*nodeState, len(nodes))
	for i, n := range nodes {
		name := n.Node().Name
		st := s.m[name]
		if st == nil || st.gen != n.GetGeneration() || st.slices != sliceGen {
			st = &nodeState{gen: n.GetGeneration(), slices: sliceGen}
			s.m[name] = st
		}
		st.seen = s.cycles
		if st.rev != set.rev || st.epoch != s.epoch {
			st.rev, st.epoch, st.scores = set.rev, s.epoch, st.scores[:0]
		}
		if v, ok := st.find(req); ok && cacheable {
			out[n] = v
			continue
		}
		states[i] = st
		missed = append(missed, i)
	}
	got := make([]int64, len(missed))
	compute := func(sc *scorer, j int) {
		i := missed[j]
		got[j] = pl.rawScore(sc, nodes[i], r, states[i])
	}
	// Pieces of parallelFrom nodes, each scored with one scorer taken from
	// the pool and put back.
	piece := func(p int) {
		sc := set.get()
		for j := p * parallelFrom; j < min((p+1)*parallelFrom, len(missed)); j++ {
			compute(sc, j)
		}
		set.put(sc)
	}
	pieces := (len(missed) + parallelFrom - 1) / parallelFrom
	if pieces <= 1 || pl.parallel == nil {
		for p := range pieces {
			piece(p)
		}
	} else {
		pl.parallel.Until(ctx, pieces, piece, Name)
	}
	for j, i := range missed {
		st := states[i]
		if cacheable {
			st.keep(req, got[j])
		}
		out[nodes[i]] = got[j]
	}
	if s.cycles%forgetAfter == 0 {
		for name, st := range s.m {
			if s.cycles-st.seen >= forgetAfter {
				delete(s.m, name)
			}
		}
	}
	return out
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
		s.reqs = map[reqKey]uint32{}
		s.epoch++
	}
	id := uint32(len(s.reqs))
	s.reqs[key] = id
	return id, true
}

// rawScore is the placement score of r on n scaled to Score's integers,
// or unscored where the plugin cannot model the node.
func (pl *Plugin) rawScore(sc *scorer, n fwk.NodeInfo, r request, st *nodeState) int64 {
	raw, ok := sc.score(n, r, pl.view(n, r, st))
	if !ok {
		return unscored
	}
	return int64(math.Round(raw * scoreScale))
}

// view is the node's GPUs as r's pool mode sees them; for a pod without
// GPU, whichever GPUs the node has. Views are kept in st.
func (pl *Plugin) view(n fwk.NodeInfo, r request, st *nodeState) *gpuView {
	if r.gpu() && !r.dra {
		return st.view(viewKey{res: r.shareResource}, func() *gpuView {
			return devicePluginView(n, pl.offers.get(n.Node()), r.shareResource)
		})
	}
	if v := st.view(viewKey{dra: true}, func() *gpuView { return pl.draView(n) }); v != nil || r.gpu() {
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
