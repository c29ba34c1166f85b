package placement

import "sync/atomic"

// placerCache keeps the placerSet of the newest workload revision, so that
// cycles under one workload share its memoized fragmentation.
type placerCache struct{ p atomic.Pointer[placerSet] }

// get returns the set for rev, making one when the workload changed.
func (c *placerCache) get(rev uint64, kinds []weighted) *placerSet {
	if s := c.p.Load(); s != nil && s.rev == rev && s.kinds != nil {
		return s
	}
	s := newPlacerSet(rev, kinds)
	c.p.Store(s)
	return s
}
