package webhook

import (
	"math"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/decide"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

// workload is decide.Demand over the webhook's cache of gpuadmit's pods: it
// counts the cached pods by kind (the models they accept, the model they
// hold GPU on and how much), updated by the Pod informer's events as the
// tally is, so that an admission never walks the pods (150,000 at scale).
// The pods this replica admitted that the cache has not shown yet (the
// ledger's) count from their first event, a moment later.
//
// Need is kept until the counts or the inventory change: a decision then
// costs a map lookup, and a recount costs allocator.Scarcity over the
// kinds, whose number grows with the distinct (accepted models, model,
// size) of the pods, not with the pods. Under churn (a pod event between
// every two admissions) that is one recount per admission, still
// independent of the number of pods.
type workload struct {
	mu    sync.Mutex
	byPod map[types.NamespacedName]podKind
	kinds map[podKind]int
	gen   uint64 // counts changes of kinds
	// seen is the Need last computed, for the counts at gen and the inventory inv.
	seen struct {
		gen  uint64
		inv  *inventory.Inventory
		need map[string]float64
	}
}

var _ decide.Demand = (*workload)(nil)

// podKind is what the pick's prices read of one pod: the models it
// accepts (record.AnnotationAcceptedModels), the per-model accounting
// resource it requests (which names the model it holds GPU on) and the MiB
// of GPU memory it holds there.
type podKind struct {
	accepted string
	model    string
	mib      int64
}

func newWorkload() *workload {
	return &workload{byPod: map[types.NamespacedName]podKind{}, kinds: map[podKind]int{}}
}

// podKindOf is p's kind where it holds GPU (at, from tally.set) and gpuadmit
// wrote the models it accepts; false for a pod placed by DRA alternatives
// (it names no model it holds GPU on: the scheduler chose), one that
// finished, and one admitted before the annotation was written.
func podKindOf(p *corev1.Pod, at placed) (podKind, bool) {
	accepted := p.Annotations[record.AnnotationAcceptedModels]
	if at.key == "" || accepted == "" {
		return podKind{}, false
	}
	for r, q := range at.req {
		if r != inventory.ResourceMemoryMiB && inventory.IsAccountingResource(r) && q > 0 {
			return podKind{accepted: accepted, model: r, mib: q}, true
		}
	}
	return podKind{}, false
}

// set counts p as the kind it is now, instead of what it was.
func (w *workload) set(p *corev1.Pod, at placed) {
	k, ok := podKindOf(p, at)
	id := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	w.mu.Lock()
	defer w.mu.Unlock()
	if old, had := w.byPod[id]; had && ok && old == k {
		return
	}
	w.drop(id)
	if !ok {
		return
	}
	w.byPod[id] = k
	w.kinds[k]++
	w.gen++
}

// remove stops counting p.
func (w *workload) remove(p *corev1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drop(types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
}

// drop takes a pod out of its kind's count; w.mu is held.
func (w *workload) drop(id types.NamespacedName) {
	k, ok := w.byPod[id]
	if !ok {
		return
	}
	delete(w.byPod, id)
	if w.kinds[k]--; w.kinds[k] == 0 {
		delete(w.kinds, k)
	}
	w.gen++
}

// Need is expectedNeed of the counted kinds on inv, computed again only
// when the counts or the inventory changed since the last call.
func (w *workload) Need(inv *inventory.Inventory) map[string]float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen.inv == inv && w.seen.gen == w.gen && w.seen.inv != nil {
		return w.seen.need
	}
	need := expectedNeed(w.kinds, inv)
	w.seen.gen, w.seen.inv, w.seen.need = w.gen, inv, need
	return need
}

// expectedNeed is, per GPU model, allocator.Scarcity of the kinds times the
// model's milli-GPU, less the milli-GPU that pinned kinds (those that do not
// accept every model the cluster has) hold on it; only models with some
// left. A kind's size is its MiB over its model's GPU memory (a whole GPU is
// 1000, a share its fraction); kinds on models the inventory lacks count
// nowhere.
func expectedNeed(kinds map[podKind]int, inv *inventory.Inventory) map[string]float64 {
	if len(kinds) == 0 {
		return nil
	}
	supply, gpuMiB, byResource := modelSupply(inv)
	tasks := make([]allocator.FragTask, 0, len(kinds))
	held := map[string]float64{}
	for k, n := range kinds {
		m, ok := byResource[k.model]
		if !ok {
			continue
		}
		milli := k.mib * 1000 / gpuMiB[m]
		spec := pinnedSpec(k.accepted, supply)
		tasks = append(tasks, allocator.FragTask{GPUMilli: milli, GPUs: 1, Spec: spec, Weight: float64(n)})
		if spec != "" {
			held[m] += float64(milli) * float64(n)
		}
	}
	var out map[string]float64
	for m, s := range allocator.Scarcity(tasks, supply) {
		if left := s*float64(supply[m])*1000 - held[m]; left > 0 {
			if out == nil {
				out = map[string]float64{}
			}
			out[m] = left
		}
	}
	return out
}

// modelSupply is, per GPU model of inv, its GPUs (each pool's GPU memory
// in MiB, inventory.Pool.UnitMiB over its allocatable, over one GPU's,
// rounded: a MIG pool whose slices leave some memory unused still counts
// its GPUs), one GPU's MiB, and the model by its accounting resource.
func modelSupply(inv *inventory.Inventory) (map[string]int, map[string]int64, map[string]string) {
	mib := map[string]float64{}
	gpuMiB := map[string]int64{}
	byResource := map[string]string{}
	for _, p := range inv.Pools {
		if p.GPUMemoryMiB <= 0 {
			continue
		}
		for r, q := range p.Allocatable {
			mib[p.Model] += float64(q * p.UnitMiB(r))
		}
		gpuMiB[p.Model] = p.GPUMemoryMiB
		byResource[inventory.ModelResource(p.Model)] = p.Model
	}
	supply := make(map[string]int, len(mib))
	for m, total := range mib {
		if n := int(math.Round(total / float64(gpuMiB[m]))); n > 0 {
			supply[m] = n
		} else if total > 0 {
			supply[m] = 1
		}
	}
	return supply, gpuMiB, byResource
}

// pinnedSpec is the allocator.FragTask Spec of a kind that accepts the
// models listed (comma-separated): "" (any model) where they include every
// model of supply, else the models joined by "|".
func pinnedSpec(accepted string, supply map[string]int) string {
	models := strings.Split(accepted, ",")
	all := true
	for m := range supply {
		if !slices.Contains(models, m) {
			all = false
			break
		}
	}
	if all {
		return ""
	}
	return strings.Join(models, "|")
}
