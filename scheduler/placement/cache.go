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
	workRev uint64    // the workload revision set is of
	supply  [2]uint64 // the supply version its prices are of
	sets    uint64    // sets made: the next set's revision
}

// get returns the set for workload revision rev of kinds, priced over
// pinned at the supply's current version, making one when the workload
// or the prices changed. A set's revision numbers the sets made, so that
// scores kept under one set (nodeStates) end with new prices as with a
// new workload; a change of supply that leaves the prices as they were
// keeps the set.
func (c *placerCache) get(pl *Plugin, rev uint64, kinds []weighted, pinned []pinnedKind) *placerSet {
	c.mu.Lock()
	defer c.mu.Unlock()
	at := pl.supplyVersion()
	if c.set != nil && c.workRev == rev && c.supply == at {
		return c.set
	}
	pl.refreshSupply(at)
	prices := pl.prices(pinned)
	c.supply = at
	if c.set != nil && c.workRev == rev && maps.Equal(prices, c.set.prices) {
		return c.set
	}
	cause := "prices"
	if c.set == nil || c.workRev != rev {
		cause = "workload"
	}
	scoreSets.WithLabelValues(cause).Inc()
	c.sets++
	c.set, c.workRev = newPlacerSet(c.sets, kinds), rev
	c.set.prices = prices
	return c.set
}
