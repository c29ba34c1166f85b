package packing

import (
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Options of a run. The zero value uses the wall clock and the protocol's
// arrival points.
type Options struct {
	// Seed seeds the policy's random choices (Random's). Default 0.
	Seed uint64
	// Arrived lists the arrival points, fractions of the cluster's GPU
	// capacity, ascending. Default: 0.50, 0.55, …, 1.30.
	Arrived []float64
	// Now is the clock decision times are taken with. Default time.Now.
	Now func() time.Time
}

// Point is the cluster's state when the GPU asked for by the pods arrived so
// far first reaches Arrived × capacity.
type Point struct {
	Arrived        float64 `json:"arrived"`
	AllocatedPct   float64 `json:"allocatedPct"`
	UnallocatedPct float64 `json:"unallocatedPct"`
}

// Run is the outcome of one simulation.
type Run struct {
	Points    []Point
	Decisions []time.Duration // per pod: scoring every node, choosing, placing
	Failed    int
}

// DefaultArrived is 0.50 to 1.30 in steps of 0.05.
func DefaultArrived() []float64 {
	var out []float64
	for pct := 50; pct <= 130; pct += 5 {
		out = append(out, float64(pct)/100)
	}
	return out
}

// Admitter is a policy with an admission step before the scheduler, as
// gpuadmit's webhook decides what a pod may use before any node is scored.
type Admitter interface {
	Policy
	// Admit returns p as admitted to c: its Spec narrowed to the GPU
	// models it may use. ok is false where p is denied: it takes nothing
	// and counts as failed.
	Admit(c *Cluster, p Pod) (admitted Pod, ok bool)
	// Placed tells the policy where the admitted pod went; nil when it
	// fit no node (in a cluster it would wait, Pending).
	Placed(admitted Pod, n *NodeState)
}

// Simulate places pods one by one, in order, on c with policy; a pod that
// fits no node fails and is not retried; pods never leave. An Admitter
// admits each pod first, and the pod as admitted is placed.
func Simulate(c *Cluster, pods []Pod, policy Policy, o Options) Run {
	o = o.withDefaults()
	r := newRand(o.Seed)
	rankTies(c, r)
	tally := NewTally(c.CapacityMilli(), o.Arrived)
	var run Run
	admitter, admits := policy.(Admitter)
	for _, p := range pods {
		start := o.Now()
		q, admitted := p, true
		if admits {
			q, admitted = admitter.Admit(c, p)
		}
		var n *NodeState
		if admitted {
			n = choose(c, q, policy, r)
		}
		if n != nil {
			n.Assign(q, policy.GPUs(n, q, r))
		} else {
			run.Failed++
		}
		if admits && admitted {
			admitter.Placed(q, n)
		}
		run.Decisions = append(run.Decisions, o.Now().Sub(start))
		tally.Add(p, n != nil)
	}
	run.Points = tally.Points()
	return run
}

func (o Options) withDefaults() Options {
	if o.Arrived == nil {
		o.Arrived = DefaultArrived()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// choose returns a node of highest score among those p fits, ties going to
// the lowest TieRank; nil when p fits none. That is the artifact's
// kube-scheduler: its vendored generic_scheduler.go selectHost takes the
// tied node whose name sorts first ("for reproducibility") instead of
// drawing one, and its simulator prefixes every node's name with its place
// in a seeded permutation (syncClusterResourceList), so a tie goes to the
// first node of a random order fixed for the run (rankTies). Random still
// draws (its score is max on one feasible node drawn uniformly, as the
// artifact's RandomScore does).
func choose(c *Cluster, p Pod, policy Policy, r *rand.Rand) *NodeState {
	if _, ok := policy.(Random); ok {
		return draw(c, p, r)
	}
	var best *NodeState
	var bestScore float64
	for _, n := range c.Nodes {
		if !n.Fits(p) {
			continue
		}
		s := policy.Score(n, p)
		if best == nil || s > bestScore || s == bestScore && n.TieRank < best.TieRank {
			best, bestScore = n, s
		}
	}
	return best
}

// rankTies orders c's nodes for ties as the artifact does: sorted by name,
// the i-th node takes the i-th number of a permutation drawn from r.
func rankTies(c *Cluster, r *rand.Rand) {
	byName := slices.Clone(c.Nodes)
	slices.SortFunc(byName, func(a, b *NodeState) int { return strings.Compare(a.Name, b.Name) })
	for i, j := range r.Perm(len(byName)) {
		byName[i].TieRank = j
	}
}

// draw returns a node p fits, drawn uniformly; nil when p fits none.
func draw(c *Cluster, p Pod, r *rand.Rand) *NodeState {
	var picked *NodeState
	seen := 0
	for _, n := range c.Nodes {
		if n.Fits(p) {
			seen++
			if r.IntN(seen) == 0 {
				picked = n
			}
		}
	}
	return picked
}

func point(arrived float64, allocated, capacity int64) Point {
	pct := 100 * float64(allocated) / float64(capacity)
	return Point{Arrived: arrived, AllocatedPct: pct, UnallocatedPct: 100 - pct}
}
