package packing

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// ProductVariant is a way the product's path as gpuadmit-scheduler runs it
// departs from Product, the simulator's model of it: each field is one
// difference between the scheduler plugin (scheduler/placement) and
// Product, so that the replay's gap to the simulator can be taken apart
// one difference at a time. The zero value is Product.
type ProductVariant struct {
	// Online learns the target workload from the pods admitted so far
	// (pods that failed included: in a cluster they wait, Pending, and
	// the plugin counts pending pods), revised by the plugin's rule
	// (onlineWorkload), instead of from the whole pod list before the
	// first pod.
	Online bool
	// PluginKinds counts the workload as the plugin does: GPU pods only
	// (CPU-only pods are not counted, so they weigh neither in the
	// fragmentation nor in the CPU per GPU), each kind accepting the
	// models of its alternatives (every model of the cluster counts as
	// any) instead of those its gpu_spec names.
	PluginKinds bool
	// ModelBlind measures fragmentation as the plugin's placers do, blind
	// to models: a kind that accepts some models only counts as able to
	// run on every node (the plugin's placers see a node's pool mode, not
	// its model). The scarcity price still reads which models kinds
	// accept.
	ModelBlind bool
	// ByName orders the alternatives as in the replay, where every model's
	// GPU has the same memory (1000 MiB) and the default policies' "least
	// memory first" falls back to the pools' names, instead of by the
	// models' memory (TraceGPUMemoryMiB).
	ByName bool
	// AltStep, where set, is the cost of each step down the alternatives
	// in place of altStep: 0 drops it ("step0"), "step1" makes it 1
	// milli-GPU.
	AltStep *float64
	// Spaced revises the workload learned online (Online) at most once
	// every onlineSpacing(nodes) pods, as the plugin revises it at most
	// once every so many scheduling cycles (refreshCycles in
	// scheduler/placement), so that the scores a revision makes stale
	// are refreshed before the next.
	Spaced bool
	// Refresh is the share of pods that must come, and by which the mix
	// must move, before a revision of the workload learned online; 0 is
	// the plugin's, onlineRefresh (refresh1: the 1% the plugin had
	// before, for comparison).
	Refresh float64
}

// productModifiers are the names of ProductVariant's fields in a policy
// name: "product+online+blind" is Product with Online and ModelBlind.
// "plugin" sets every difference the plugin has (not AltStep, which it
// does not have, nor Refresh). "stepN" sets AltStep to N milli-GPU. Since
// the plugin spaces its revisions (scheduler/placement, cce14c5) that
// includes Spaced: figures of product+plugin from before were of the
// plugin without it, at a 1% rule.
var productModifiers = map[string]func(*ProductVariant){
	"online": func(v *ProductVariant) { v.Online = true },
	"kinds":  func(v *ProductVariant) { v.PluginKinds = true },
	"blind":  func(v *ProductVariant) { v.ModelBlind = true },
	"names":  func(v *ProductVariant) { v.ByName = true },
	"spaced": func(v *ProductVariant) { v.Spaced = true },
	// refresh1: the plugin's rule before 5%, revising at 1% moves.
	"refresh1": func(v *ProductVariant) { v.Refresh = 0.01 },
	"plugin": func(v *ProductVariant) {
		v.Online, v.PluginKinds, v.ModelBlind, v.ByName, v.Spaced = true, true, true, true, true
	},
}

// ParseProductVariant reads a policy name "product+MOD+MOD…"; ok is false
// for a name that is not of that form.
func ParseProductVariant(name string) (v ProductVariant, ok bool, err error) {
	mods, found := strings.CutPrefix(strings.ToLower(name), "product+")
	if !found {
		return v, false, nil
	}
	for _, m := range strings.Split(mods, "+") {
		set, known := productModifiers[m]
		if n, isStep := strings.CutPrefix(m, "step"); isStep && !known {
			f, err := strconv.ParseFloat(n, 64)
			if err != nil || !(f >= 0) || math.IsInf(f, 0) { // NaN too
				return v, true, fmt.Errorf("policy %q: modifier %q: step wants a cost of 0 or more milli-GPU after it, as in step0 or step2.5", name, m)
			}
			v.AltStep = &f
			continue
		}
		if !known {
			return v, true, fmt.Errorf("policy %q: unknown modifier %q (known: %s)", name, m,
				strings.Join(slices.Sorted(maps.Keys(productModifiers)), ", "))
		}
		set(&v)
	}
	if (v.Spaced || v.Refresh > 0) && !v.Online {
		return v, true, fmt.Errorf("policy %q: spaced and refresh1 change how the workload is learned online: name online (or plugin) too", name)
	}
	return v, true, nil
}

// uniformGPUMemoryMiB is TraceGPUMemoryMiB with every model's memory equal,
// as the replay represents them (ByName).
func uniformGPUMemoryMiB() map[string]int64 {
	out := make(map[string]int64, len(TraceGPUMemoryMiB))
	for m := range TraceGPUMemoryMiB {
		out[m] = 16384
	}
	return out
}

// NewProductVariant is NewProduct with the differences v names.
func NewProductVariant(workload []Pod, nodes []Node, v ProductVariant) (*Product, error) {
	mib := TraceGPUMemoryMiB
	if v.ByName {
		mib = uniformGPUMemoryMiB()
	}
	d, err := newProductDeriver(context.Background(), nodes, mib)
	if err != nil {
		return nil, err
	}
	if err := d.check(workload); err != nil {
		return nil, err
	}
	g := &Product{deriver: d, variant: v, supply: Supply(nodes), stepCost: altStep}
	if v.AltStep != nil {
		g.stepCost = *v.AltStep
	}
	if v.Online {
		g.online = newOnlineWorkload()
		if v.Spaced {
			g.online.spacing = onlineSpacing(len(nodes))
		}
		if v.Refresh > 0 {
			g.online.refresh = v.Refresh
		}
		g.GPUAdmit = &GPUAdmit{placer: allocator.NewPlacer(nil)}
		return g, nil
	}
	var counted []allocator.FragTask
	for _, p := range workload {
		if t, ok := g.learned(p); ok {
			counted = append(counted, t)
		}
	}
	g.learn(weigh(counted))
	return g, nil
}

// learned is p as the variant's workload counts it; false for a pod it
// does not count.
func (g *Product) learned(p Pod) (allocator.FragTask, bool) {
	t := allocator.FragTask{MilliCPU: p.MilliCPU, MemoryMiB: p.MemoryMiB, GPUMilli: p.GPUMilli, GPUs: p.GPUs, Spec: p.Spec}
	if !g.variant.PluginKinds {
		return t, true
	}
	if p.GPUs == 0 {
		return t, false
	}
	_, own, err := g.deriver.own(p)
	if err != nil {
		return t, false
	}
	t.Spec = specOf(own)
	if n := strings.Count(t.Spec, "|") + 1; n == len(g.supply) {
		t.Spec = "" // every model of the cluster: the plugin's accepts
	}
	return t, true
}

// weigh turns counted pods into kinds weighted by their share, in
// moreTypical's order.
func weigh(counted []allocator.FragTask) []allocator.FragTask {
	n := map[allocator.FragTask]float64{}
	for _, t := range counted {
		n[t]++
	}
	kinds := make([]allocator.FragTask, 0, len(n))
	for t, c := range n {
		t.Weight = c / float64(len(counted))
		kinds = append(kinds, t)
	}
	sort.Slice(kinds, func(i, j int) bool { return moreTypical(kinds[i], kinds[j]) })
	return kinds
}

// learn makes kinds the target workload: a placer over them (blind to
// models with ModelBlind) and the scarcity price of their pins.
func (g *Product) learn(kinds []allocator.FragTask) {
	g.prices = allocator.Scarcity(kinds, g.supply)
	frag := kinds
	if g.variant.ModelBlind {
		blind := slices.Clone(kinds)
		for i := range blind {
			blind[i].Spec = ""
		}
		frag = mergeKinds(blind)
	}
	g.GPUAdmit = &GPUAdmit{placer: allocator.NewPlacer(frag)}
}

// mergeKinds sums the weights of equal kinds, in moreTypical's order.
func mergeKinds(kinds []allocator.FragTask) []allocator.FragTask {
	n := map[allocator.FragTask]float64{}
	for _, t := range kinds {
		w := t.Weight
		t.Weight = 0
		n[t] += w
	}
	out := make([]allocator.FragTask, 0, len(n))
	for t, w := range n {
		t.Weight = w
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return moreTypical(out[i], out[j]) })
	return out
}

// onlineRefresh is gpuadmit-scheduler's refreshShare (a copy: its module
// cannot be imported here): a new revision of the workload needs that
// share of the pods counted (and one) to have come since the last, and the
// distribution of kinds to have moved by that much.
const onlineRefresh = 0.05

// onlineSpacing is the plugin's spacing of revisions on a cluster of nodes
// nodes (scheduler/placement's refreshCycles): a revision makes every kept
// node score stale and a cycle refreshes at most 128, so a revision waits
// until the cycles since the last could have refreshed every node. The
// plugin now counts one cycle more, the one that publishes a revision and
// refreshes none; the simulator scores every node afresh and keeps the
// spacing its figures in docs/benchmarks.md were measured with.
func onlineSpacing(nodes int) int { return (nodes + 127) / 128 }

// onlineWorkload is the target workload as gpuadmit-scheduler's plugin
// derives it (scheduler/placement/workload.go): the pods counted so far,
// by kind, published as a revision only when the rule of onlineRefresh
// allows. Pods never leave the simulator, so none is forgotten.
type onlineWorkload struct {
	count   map[allocator.FragTask]int // kinds with Weight 0
	pods    int
	changes int                            // pods counted since the last revision
	spacing int                            // counts between revisions, at least (Spaced); 0 for none
	refresh float64                        // the rule's share (Refresh); 0 is onlineRefresh
	cycles  int                            // revise calls (pods admitted) since the last revision
	share   map[allocator.FragTask]float64 // as of the last revision; nil before it
}

func newOnlineWorkload() *onlineWorkload {
	return &onlineWorkload{count: map[allocator.FragTask]int{}}
}

// add counts one pod of kind t.
func (w *onlineWorkload) add(t allocator.FragTask) {
	t.Weight = 0
	w.count[t]++
	w.pods++
	w.changes++
}

// revise returns the kinds weighted by their share and true where a new
// revision is due; false keeps the last.
func (w *onlineWorkload) revise() ([]allocator.FragTask, bool) {
	w.cycles++ // as the plugin counts its scheduling cycles, GPU or not
	if w.pods == 0 {
		return nil, false
	}
	share := cmp.Or(w.refresh, onlineRefresh)
	if w.share != nil && (float64(w.changes) < max(1, share*float64(w.pods)) || w.cycles < w.spacing || w.moved() < share) {
		return nil, false
	}
	w.changes, w.cycles = 0, 0
	w.share = make(map[allocator.FragTask]float64, len(w.count))
	kinds := make([]allocator.FragTask, 0, len(w.count))
	for t, c := range w.count {
		s := float64(c) / float64(w.pods)
		w.share[t] = s
		t.Weight = s
		kinds = append(kinds, t)
	}
	sort.Slice(kinds, func(i, j int) bool { return moreTypical(kinds[i], kinds[j]) })
	return kinds, true
}

// moved is the total variation distance between the pods counted and the
// last revision's distribution.
func (w *onlineWorkload) moved() float64 {
	var d float64
	for t, c := range w.count {
		d += math.Abs(float64(c)/float64(w.pods) - w.share[t])
	}
	for t, s := range w.share {
		if _, ok := w.count[t]; !ok {
			d += s
		}
	}
	return d / 2
}
