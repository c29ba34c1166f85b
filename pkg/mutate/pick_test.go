package mutate

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/decide"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

// fixedDemand is a workload whose need is given.
type fixedDemand map[string]float64

func (d fixedDemand) Need(*inventory.Inventory) map[string]float64 { return d }

// pickMutator decides on the example cluster, every pool empty, with the
// given Demand (nil: the policy's order).
func pickMutator(t *testing.T, d decide.Demand) (*Mutator, *inventory.Inventory) {
	t.Helper()
	inv := exampleInventory(t)
	return NewMutator(defaultEngine, StaticInventory{Inv: inv}, MutatorOptions{Capacity: &countingCapacity{}, Demand: d}), inv
}

// small asks 3000 MiB, which every model of the example cluster serves.
func small() *corev1.Pod {
	return pod("small", map[string]string{"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"})
}

// TestPickKeepsThePolicysOrderWithoutPinnedPods: where no model is needed
// by pods only some models can serve, every price is 0 and the pod goes to
// the first pool with room in the policy's order, not to the model with
// the most free GPU.
func TestPickKeepsThePolicysOrderWithoutPinnedPods(t *testing.T) {
	ordered, inv := pickMutator(t, nil)
	want := mustMutate(t, ordered, small())
	first, _ := inv.Pool(PoolOf(want.Pod))
	for name, need := range map[string]fixedDemand{"no need": nil, "need on a model no candidate names": {"no-such-model": 5000}} {
		m, _ := pickMutator(t, need)
		got := mustMutate(t, m, small())
		if PoolOf(got.Pod) != first.Name {
			t.Errorf("%s: pool %s, want the policy's first with room, %s", name, PoolOf(got.Pod), first.Name)
		}
	}
	// The pick must not be most-free in disguise: some candidate model
	// has more free GPU than the first's.
	c := &countingCapacity{}
	most := decide.ModelFree(context.Background(), c, inv, first.Model)
	for _, model := range strings.Split(want.Pod.Annotations[record.AnnotationAcceptedModels], ",") {
		most = max(most, decide.ModelFree(context.Background(), c, inv, model))
	}
	if most <= decide.ModelFree(context.Background(), c, inv, first.Model) {
		t.Fatalf("the first pool's model %s has the most free GPU of the candidates; the test cannot tell the order from most-free", first.Model)
	}
}

// TestPickLeavesAModelToPodsThatNeedIt: where pods only some models can
// serve are expected to need the first pool's model, the pod goes to the
// next candidate of another model, though both have room, and the
// explanation says why the first was passed over. Decided again, it keeps
// its pool.
func TestPickLeavesAModelToPodsThatNeedIt(t *testing.T) {
	ordered, inv := pickMutator(t, nil)
	first, _ := inv.Pool(PoolOf(mustMutate(t, ordered, small()).Pod))
	m, _ := pickMutator(t, fixedDemand{first.Model: 50000})
	got := mustMutate(t, m, small())
	p, ok := inv.Pool(PoolOf(got.Pod))
	if !ok || p.Model == first.Model {
		t.Fatalf("pool %q (model %s), want one of another model than %s, which pinned pods need", PoolOf(got.Pod), p.Model, first.Model)
	}
	passed := strings.Join(got.PassedOver, "; ")
	if !strings.Contains(passed, "pool "+first.Name+": has room, but is priced") || !strings.Contains(passed, "pool "+p.Name+"'s 0.00") {
		t.Errorf("passed over %q, want pool %s priced against pool %s's 0.00", passed, first.Name, p.Name)
	}
	if !strings.Contains(got.Explanation, "the one of least price") {
		t.Errorf("explanation %q does not say the pool was picked by price", got.Explanation)
	}
	if again := mustMutate(t, m, got.Pod); !again.Allowed || len(again.Patch) != 0 {
		t.Errorf("deciding again: allowed %v, patch %v, message %q", again.Allowed, again.Patch, again.Message)
	}
}

// TestAcceptedModelsAreWritten: a pod placed on one pool carries the
// models of every pool its candidates name, which the pick's workload reads.
func TestAcceptedModelsAreWritten(t *testing.T) {
	m, inv := pickMutator(t, nil)
	got := mustMutate(t, m, small())
	var models []string
	for _, p := range inv.Pools {
		if !slices.Contains(models, p.Model) {
			models = append(models, p.Model)
		}
	}
	accepted := got.Pod.Annotations[record.AnnotationAcceptedModels]
	if accepted == "" || !record.IsOwnAnnotation(record.AnnotationAcceptedModels) {
		t.Fatalf("accepted models %q (own annotation: %v), want a list in gpuadmit's record", accepted, record.IsOwnAnnotation(record.AnnotationAcceptedModels))
	}
	list := strings.Split(accepted, ",")
	if p, _ := inv.Pool(PoolOf(got.Pod)); !slices.Contains(list, p.Model) || !slices.IsSorted(list) {
		t.Errorf("accepted models %q, want them sorted, with the model of the pod's pool %s", accepted, p.Model)
	}
	for _, a := range list {
		if !slices.Contains(models, a) {
			t.Errorf("accepted model %s is not a model of the cluster (%v)", a, models)
		}
	}
}

// TestPickNeverGivesMoreGPUMemoryThanTheFirstPoolWithRoom: where the
// models of the pools that give the pod no more GPU memory than the first
// pool with room (an A100 1g.5gb slice, a T4 share) are needed elsewhere,
// the pod still takes one of those, not a larger slice or a whole GPU of a
// model no pinned pod needs.
func TestPickNeverGivesMoreGPUMemoryThanTheFirstPoolWithRoom(t *testing.T) {
	ordered, inv := pickMutator(t, nil)
	first := mustMutate(t, ordered, small())
	most := first.Pod.Spec.Containers[0].Resources.Limits[inventory.ResourceMemoryMiB]
	need := fixedDemand{}
	for _, p := range inv.Pools {
		if p.Mode == inventory.Shared || p.Name == PoolOf(first.Pod) {
			need[p.Model] = 50000
		}
	}
	priced, _ := pickMutator(t, need)
	got := mustMutate(t, priced, small())
	if mib := got.Pod.Spec.Containers[0].Resources.Limits[inventory.ResourceMemoryMiB]; mib.Cmp(most) > 0 {
		t.Errorf("pool %s gives the pod %s MiB, more than the %s MiB of the first pool with room, %s; passed over: %v",
			PoolOf(got.Pod), mib.String(), most.String(), PoolOf(first.Pod), got.PassedOver)
	}
}
