package webhook

import (
	"fmt"

	"github.com/gpuadmit/gpuadmit/pkg/mutate/decide"
)

// PoolPick is how the webhook picks the one pool of a pod it places on one
// pool (device-plugin and extended-resource pools; every pool under
// NoDRAAlternatives).
type PoolPick string

const (
	// PickExpected takes, among the candidate pools with room, the one whose
	// model is of least price: the GPU that the cached pods only some models
	// can serve are expected to need there, over its free GPU
	// (mutate.MutatorOptions.Demand). Where no such pod is cached it is
	// PickOrder.
	PickExpected PoolPick = "expected"
	// PickOrder takes the first candidate pool with room, in the policy's order.
	PickOrder PoolPick = "order"
)

// ParsePoolPick reads a --pool-pick value; empty is PickExpected.
func ParsePoolPick(s string) (PoolPick, error) {
	switch PoolPick(s) {
	case "", PickExpected:
		return PickExpected, nil
	case PickOrder:
		return PickOrder, nil
	}
	return "", fmt.Errorf("pool pick %q: want %s or %s", s, PickExpected, PickOrder)
}

// demand is what the Mutator prices the pick with: the cached workload
// under PickExpected, none (the policy's order) under PickOrder.
func demand(pick PoolPick, capa *capacity) decide.Demand {
	if pick == PickOrder || capa == nil {
		return nil
	}
	return capa.workload
}
