package placement

import (
	"maps"
	"sync"
)

// placerCache keeps the placerSet of the newest workload revision and
// scarcity prices, so that cycles under one workload share its memoized
// fragmentation.
type placerCache struct {
	mu      sync.Mutex
	set     *placerSet
	workRev uint64       // the workload revision set is of
	pinned  []pinnedKind // its pinned kinds, which its prices are of
	supply  [2]uint64    // the supply version its prices are of
	sets    uint64       // sets made: the next set's revision
}

// get returns the set for workload revision rev of kinds, priced over
// pinned at the supply's current version, making one when the workload
// or the prices changed. A set's revision numbers the sets made for a
// new workload, whose fragmentation differs, so that the scores kept under
// one (nodeStates) are stale under the next. New prices under the same
// workload (nodes or slices came or went) reprice the set: the same
// revision, scorers and memos, since the fragmentation is the same, and
// kept scores pay the new prices as they are (nodeStates.priced). A
// change of supply that leaves the prices as they were keeps the set.
//
// A cycle that took its snapshot before a revision was published, and
// asks for the set after the revision's was made (reviseAsync), is given
// the newer set, repriced if the supply changed since: a set for the
// older revision would be made only to be replaced at the next cycle.
func (c *placerCache) get(pl *Plugin, rev uint64, kinds []weighted, pinned []pinnedKind) *placerSet {
	return c.getFor(pl, rev, kinds, pinned, false)
}

// getFor is get, for the goroutine that made revision rev (background)
// or for a cycle.
func (c *placerCache) getFor(pl *Plugin, rev uint64, kinds []weighted, pinned []pinnedKind, background bool) *placerSet {
	c.mu.Lock()
	defer c.mu.Unlock()
	at := pl.supplyVersion()
	if c.set != nil && c.workRev > rev { // a snapshot older than the set made
		rev, kinds, pinned = c.workRev, c.set.kinds, c.pinned
	}
	if c.set != nil && c.workRev == rev && c.supply == at {
		return c.set
	}
	pl.refreshSupply(at)
	prices := pl.prices(pinned)
	c.supply = at
	if c.set != nil && c.workRev == rev && maps.Equal(prices, c.set.prices) {
		return c.set
	}
	if c.set != nil && c.workRev == rev {
		scoreSets.WithLabelValues("prices").Inc()
		c.set = c.set.repriced(prices)
		return c.set
	}
	scoreSets.WithLabelValues("workload").Inc()
	c.sets++
	c.set, c.workRev, c.pinned = newPlacerSet(c.sets, kinds), rev, pinned
	c.set.prices, c.set.background = prices, background
	return c.set
}
