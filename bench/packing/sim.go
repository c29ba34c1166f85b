package packing

import (
	"math/rand/v2"
	"time"
)

// Options of a run. The zero value uses the wall clock and the protocol's
// arrival points.
type Options struct {
	// Seed seeds the policy's random choices (ties, Random). Default 0.
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

// Simulate places pods one by one, in order, on c with policy; a pod that
// fits no node fails and is not retried; pods never leave.
func Simulate(c *Cluster, pods []Pod, policy Policy, o Options) Run {
	o = o.withDefaults()
	r := newRand(o.Seed)
	capacity := c.CapacityMilli()
	var run Run
	var arrived, allocated int64
	next := 0
	for _, p := range pods {
		start := o.Now()
		n := choose(c, p, policy, r)
		if n != nil {
			n.Assign(p, policy.GPUs(n, p, r))
			allocated += p.GPUMilliTotal()
		} else {
			run.Failed++
		}
		run.Decisions = append(run.Decisions, o.Now().Sub(start))
		arrived += p.GPUMilliTotal()
		for ; next < len(o.Arrived) && float64(arrived) >= o.Arrived[next]*float64(capacity); next++ {
			run.Points = append(run.Points, point(o.Arrived[next], allocated, capacity))
		}
	}
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

// choose returns a node of highest score among those p fits, ties broken
// uniformly at random; nil when p fits none.
func choose(c *Cluster, p Pod, policy Policy, r *rand.Rand) *NodeState {
	var best *NodeState
	var bestScore float64
	ties := 0
	for _, n := range c.Nodes {
		if !n.Fits(p) {
			continue
		}
		s := policy.Score(n, p)
		switch {
		case best == nil || s > bestScore:
			best, bestScore, ties = n, s, 1
		case s == bestScore:
			ties++
			if r.IntN(ties) == 0 {
				best = n
			}
		}
	}
	return best
}

func point(arrived float64, allocated, capacity int64) Point {
	pct := 100 * float64(allocated) / float64(capacity)
	return Point{Arrived: arrived, AllocatedPct: pct, UnallocatedPct: 100 - pct}
}
