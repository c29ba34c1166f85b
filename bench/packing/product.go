package packing

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// altStep is gpuadmit-scheduler's cost, in milli-GPU, of each step down a
// pod's prioritized list of alternatives: a copy of altStep in
// scheduler/placement/alternatives.go (a module of its own, which this
// one cannot import): a ten-thousandth, the last tie-break (see there).
const altStep = 1e-4

// Product is the path a trace pod takes through the product on DRA pools.
// The webhook, with the embedded default policies, gives the pod its
// alternatives (ProductDeriver): a share or whole GPUs on each GPU model it
// accepts, in the policy's order (least GPU memory first). Then
// gpuadmit-scheduler scores each node by what the DRA allocator will take
// there, the first alternative in order that fits, on the first GPUs that
// hold it (the allocator's device order): allocator.Placer's cost of that,
// the scarcity price of the node's model included, plus altStep per step
// down the list. The allocator then allocates those GPUs.
type Product struct {
	*GPUAdmit // its placer prices nothing: prices does
	deriver   *ProductDeriver
	cur       []Alt // the alternatives of the pod being placed
	variant   ProductVariant
	stepCost  float64            // the cost of a step down the alternatives: altStep, or variant.AltStep
	supply    map[string]int     // the cluster's GPUs per model
	prices    map[string]float64 // the scarcity price per milli-GPU, by model
	online    *onlineWorkload    // the workload learned so far (variant.Online); nil: the whole list
}

// NewProduct learns the workload as NewGPUAdmit does and derives every
// kind of pod's alternatives from the default policies (see
// ProductDeriver); it fails where a pod would be denied or would get an
// alternative the simulator cannot place (see sameSize).
func NewProduct(workload []Pod, nodes []Node) (*Product, error) {
	return NewProductVariant(workload, nodes, ProductVariant{})
}

// check derives the alternatives of every pod of workload.
func (d *ProductDeriver) check(workload []Pod) error {
	for _, p := range workload {
		if _, _, err := d.own(p); err != nil {
			return err
		}
	}
	return nil
}

// own derives p's alternatives (Alternatives) and those of them that take
// what p asks for (sameSize).
func (d *ProductDeriver) own(p Pod) (alts, own []Alt, err error) {
	alts, err = d.Alternatives(context.Background(), p)
	if err != nil {
		return nil, nil, err
	}
	own, err = sameSize(p, alts)
	if err != nil {
		return nil, nil, err
	}
	return alts, own, nil
}

// sameSize returns the alternatives of alts that take what p asks for. An
// alternative of another size (whole GPUs after a share) is never taken
// where an alternative of p's size on the same model comes before it: a GPU
// idle enough for it holds the share too. The simulator, which counts a
// pod's GPU as it asked, refuses any other.
func sameSize(p Pod, alts []Alt) ([]Alt, error) {
	var out []Alt
	for _, a := range alts {
		if a.Milli == p.GPUMilli && a.GPUs == p.GPUs {
			out = append(out, a)
			continue
		}
		if !slices.ContainsFunc(out, func(b Alt) bool { return b.Model == a.Model }) {
			return nil, fmt.Errorf("a pod of %d×%dm GPU, spec %q, gets %d×%dm on %s before its own size there; the simulator cannot place that",
				p.GPUs, p.GPUMilli, p.Spec, a.GPUs, a.Milli, a.Model)
		}
	}
	return out, nil
}

// Admit narrows p to the models of its alternatives; a pod the webhook
// would deny is not admitted.
// With variant.Online, an admitted pod counts in the workload before it is
// placed, as the plugin counts a pod once the informer holds it.
func (g *Product) Admit(_ *Cluster, p Pod) (Pod, bool) {
	g.cur = nil
	if p.GPUs == 0 {
		g.count(p)
		return p, true
	}
	alts, own, err := g.deriver.own(p)
	if err != nil {
		return p, false
	}
	g.count(p)
	g.cur, p.Spec = alts, specOf(own)
	return p, true
}

// count adds p to the workload learned online, revising it where due.
func (g *Product) count(p Pod) {
	if g.online == nil {
		return
	}
	if t, ok := g.learned(p); ok {
		g.online.add(t)
	}
	if kinds, ok := g.online.revise(); ok {
		g.learn(kinds)
	}
}

// Placed changes nothing: the product's score reads the cluster only.
func (*Product) Placed(Pod, *NodeState) {}

// specOf is the models of alts as a gpu_spec ("T4|P100"), in their order.
func specOf(alts []Alt) string {
	var models []string
	for _, a := range alts {
		if !slices.Contains(models, a.Model) {
			models = append(models, a.Model)
		}
	}
	return strings.Join(models, "|")
}

// Score is −(cost of the first-fit GPUs + the scarcity price of what they
// take + altStep × the alternative's index) + best fit/100, the index
// being that of the first alternative on n's model in the pod's list: on a
// node p fits, that one fits (Admit narrowed p to the models of
// alternatives of its size, and sameSize checked that one of its size
// comes first on every model).
func (g *Product) Score(n *NodeState, p Pod) float64 {
	step := 0
	if p.GPUs > 0 {
		step = slices.IndexFunc(g.cur, func(a Alt) bool { return a.Model == n.Model })
	}
	cost, _ := g.placer.CostOn(fragNode(n), g.fragOf(n), allocator.FragTask{
		MilliCPU: p.MilliCPU, MemoryMiB: p.MemoryMiB, GPUMilli: p.GPUMilli, GPUs: p.GPUs}, firstFitGPUs(n, p))
	cost += g.prices[n.Model] * float64(p.GPUMilliTotal())
	return -cost - g.stepCost*float64(step) + bestFitTie*BestFit{}.Score(n, p)
}

// GPUs is the DRA allocator's: the first that hold the pod.
func (*Product) GPUs(n *NodeState, p Pod, _ *rand.Rand) []int { return firstFitGPUs(n, p) }
