package packing

// Tally records the cluster's allocation as pods arrive, the protocol's
// measure: a Point each time the GPU asked for by the pods arrived so far
// first reaches one of the arrival points (fractions of capacity). Simulate
// keeps one; so does anything that replays placements made elsewhere, so
// that both count alike.
type Tally struct {
	capacity           int64
	at                 []float64
	arrived, allocated int64
	points             []Point
}

// NewTally returns a tally for a cluster of capacity milli-GPU and the
// ascending arrival points at (nil: DefaultArrived).
func NewTally(capacity int64, at []float64) *Tally {
	if at == nil {
		at = DefaultArrived()
	}
	return &Tally{capacity: capacity, at: at}
}

// Add counts the next pod to arrive; placed reports whether it got its GPU.
func (t *Tally) Add(p Pod, placed bool) {
	if placed {
		t.allocated += p.GPUMilliTotal()
	}
	t.arrived += p.GPUMilliTotal()
	for len(t.points) < len(t.at) && float64(t.arrived) >= t.at[len(t.points)]*float64(t.capacity) {
		t.points = append(t.points, point(t.at[len(t.points)], t.allocated, t.capacity))
	}
}

// Points are the points reached so far.
func (t *Tally) Points() []Point { return t.points }
