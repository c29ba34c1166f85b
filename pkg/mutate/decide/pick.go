package decide

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// Demand is what the pick of one pool knows of the cluster's workload.
type Demand interface {
	// Need is, per GPU model, the milli-GPU that the pods only some models
	// can serve are still expected to need there: allocator.Scarcity's
	// share of the model's GPUs, less what such pods already hold on it.
	// Models with none are absent; nil where no pod is pinned so. Callers
	// must not change the map.
	Need(inv *inventory.Inventory) map[string]float64
}

// acceptedModels is record.AnnotationAcceptedModels' value for a pod whose
// candidates name pools: the models of those the inventory has.
func acceptedModels(order []string, inv *inventory.Inventory) string {
	var models []string
	for _, name := range order {
		if p, ok := inv.Pool(name); ok && !slices.Contains(models, p.Model) {
			models = append(models, p.Model)
		}
	}
	slices.Sort(models)
	return strings.Join(models, ",")
}

// pricer prices a model for the pick among the pools with room: the least
// price wins, ties keeping the policy's order. The price is the model's
// need (Demand.Need) over its free milli-GPU, so a model that pods which
// can run nowhere else are expected to need is kept for them, and models
// no such pod needs cost nothing. The simulator's pods that wait (fit
// nowhere) add to the price there (bench/packing's PinExpected); the
// webhook leaves that term out, since which pods wait for lack of any
// model is the scheduler's knowledge, not the pod cache's.
type pricer struct {
	need map[string]float64
	// freeOf is the model's free milli-GPU, over all its pools; free
	// asks it once per model and decision.
	freeOf func(model string) float64
	frees  map[string]float64
}

// free is the model's free milli-GPU.
func (p *pricer) free(model string) float64 {
	f, ok := p.frees[model]
	if !ok {
		f = p.freeOf(model)
		p.frees[model] = f
	}
	return f
}

// price is the model's need over its free milli-GPU; 0 where none is needed.
func (p *pricer) price(model string) float64 {
	n := p.need[model]
	if n <= 0 {
		return 0
	}
	return n / max(p.free(model), 1)
}

// pricer is the pick's pricer for one decision, or nil where the pick
// keeps the policy's order: no Demand or no Capacity set, a pod decided
// again for its record (its pool is fixed), or no model any candidate
// names is needed by pods only some models can serve.
func (r Room) pricer(ctx context.Context, order []string, inv *inventory.Inventory) *pricer {
	if r.Demand == nil || r.Capacity == nil || r.Recorded != "" {
		return nil
	}
	need := r.Demand.Need(inv)
	if !slices.ContainsFunc(order, func(name string) bool { p, ok := inv.Pool(name); return ok && need[p.Model] > 0 }) {
		return nil
	}
	return &pricer{need: need, frees: map[string]float64{}, freeOf: func(model string) float64 { return ModelFree(ctx, r.Capacity, inv, model) }}
}

// ModelFree is the milli-GPU free on the model's pools: each GPU resource's
// free units (inventory.Held.PoolFree) times the real memory of one, over
// a GPU's memory. It is the denominator of the pick's price.
func ModelFree(ctx context.Context, c Capacity, inv *inventory.Inventory, model string) float64 {
	var free float64
	for i := range inv.Pools {
		p := inv.Pools[i]
		if p.Model != model || p.GPUMemoryMiB == 0 {
			continue
		}
		units := map[string]int64{}
		for r := range p.Allocatable {
			if p.UnitMiB(r) > 0 {
				units[r] = 1
			}
		}
		for r, q := range c.Held(ctx, p).PoolFree(p, units) {
			free += float64(q*p.UnitMiB(r)) * 1000 / float64(p.GPUMemoryMiB)
		}
	}
	return free
}

// roomy is a pool that has room for the pod, with its price.
type roomy struct {
	ch    *Choice
	price float64
	// at is how many reasons were given before it, in the policy's order.
	at int
}

// cheapest picks among the pools with room the one of least price (the
// first on a tie) and says of each earlier one with room why it was passed
// over, between the reasons of the pools without room, in the policy's
// order. The price weighs models, not what the pod takes of them, so only
// a pool where the pod takes no more GPU memory (its
// inventory.ResourceMemoryMiB) than on the first pool with room competes:
// a whole 80 GB GPU is never given for a 20 GB slice's worth because the
// slice's model is needed elsewhere.
func (p *pricer) cheapest(rooms []roomy, reasons []string) *Choice {
	most := rooms[0].ch.Demand[inventory.ResourceMemoryMiB]
	best := 0
	for i, r := range rooms {
		if r.ch.Demand[inventory.ResourceMemoryMiB] <= most && r.price < rooms[best].price {
			best = i
		}
	}
	b := rooms[best]
	var skipped []string
	j := 0
	for _, r := range rooms[:best] {
		skipped = append(skipped, reasons[j:r.at]...)
		j = r.at
		skipped = append(skipped, p.passedOver(r, b, most))
	}
	b.ch.Skipped = append(skipped, reasons[j:b.at]...)
	b.ch.Priced = true
	return b.ch
}

// passedOver says why pool r, with room, was passed over for b.
func (p *pricer) passedOver(r, b roomy, most int64) string {
	if mib := r.ch.Demand[inventory.ResourceMemoryMiB]; mib > most {
		return fmt.Sprintf("pool %s: has room, but would give the pod %d MiB of GPU memory, more than the %d MiB of the first pool with room",
			r.ch.Pool.Name, mib, most)
	}
	m := r.ch.Pool.Model
	return fmt.Sprintf("pool %s: has room, but is priced %.2f against pool %s's %.2f "+
		"(the expected demand of pods that only some GPU models can serve: %.0f milli-GPU on %s, over its %.0f milli-GPU free)",
		r.ch.Pool.Name, r.price, b.ch.Pool.Name, b.price, p.need[m], m, p.free(m))
}
