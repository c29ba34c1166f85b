package placement

import (
	"fmt"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// Alternatives. gpuadmit's webhook writes, for a pod its policy lets run
// on several DRA pools, a claim per GPU container whose one request lists
// what the container accepts as firstAvailable subrequests (pkg/claim,
// AlternativesSpec): MIG devices of a profile, a share of one GPU's
// memory, or whole GPUs, each of one model (a CEL selector on the model
// attribute). DynamicResources allocates, on each node, the first
// alternative in order that fits there; which one it is on a node it does
// not tell the other plugins. So the plugin predicts it: predict searches
// the node's free devices in the allocator's order (requests in order,
// each request's alternatives in order, devices in slice order, backing
// up when a later request finds nothing) on the same view of what
// allocated and in-flight claims hold, and scores what that alternative
// takes of the node. Its cost is the placement cost of those items plus
// altStep for each step down the list: the policy's order decides between
// nodes only where cost and best fit tie, and the score trades a later
// alternative on one model for a fragmenting first on another whenever
// the later one costs less.

// altStep is the cost, in milli-GPU of fragmentation (allocator.Placer's
// unit), of each step down a prioritized list: a ten-thousandth, so that
// the steps of a pod's lists (seven for the longest list the API allows,
// more only for a pod of several lists) stay under one point of the
// best-fit tie-break (bestFitTie, a hundredth): the order is the last
// tie-break. The order also still decides, on the node chosen, which
// alternative DynamicResources allocates.
//
// It was 10 milli-GPU, to let the order decide between nodes whose costs
// were close. In the simulator's product path (bench/packing, product+stepN
// against product+step0) that cost 0.4-1.6 pp of unallocated GPU on
// gpushare20, cpu250, cpu300 and multigpu20 at seeds 42-44 (0.5-1.1 on the
// means of 42-51), and still 0.15-0.6 pp at 1 milli-GPU on cpu250,
// multigpu20 and cpu300, while it gained nothing but on cpu235: a step
// that outranks best fit steers pods onto the first model of the
// default policies' order (least GPU memory first), which the scarcity
// price already weighs better. docs/placement.md has the study.
const altStep = 1e-4

// alternative is one subrequest of a prioritized list as the plugin sizes
// it: items (shares and whole GPUs) or migs MIG devices of DeviceClass
// migClass, on a node whose GPUs are of model ("" for any).
type alternative struct {
	model    string
	items    []item
	migClass string
	migs     int64
}

// choice is a DRA request: its alternatives in the allocator's order.
type choice []alternative

// listChoice sizes a prioritized list; false when a subrequest is of a
// kind the plugin cannot size (another class, all devices, a selector
// other than gpuadmit's model selector), and then the plugin does not
// score the pod, as before it sized lists.
func listChoice(subs []resourceapi.DeviceSubRequest) (choice, bool) {
	c := make(choice, 0, len(subs))
	for _, s := range subs {
		a, ok := subAlternative(s)
		if !ok {
			return nil, false
		}
		c = append(c, a)
	}
	return c, true
}

func subAlternative(s resourceapi.DeviceSubRequest) (alternative, bool) {
	var a alternative
	if s.AllocationMode != "" && s.AllocationMode != resourceapi.DeviceAllocationModeExactCount {
		return a, false
	}
	for _, sel := range s.Selectors {
		if sel.CEL == nil {
			return a, false
		}
		m, ok := selectedModel(sel.CEL.Expression)
		if !ok || (a.model != "" && a.model != m) {
			return a, false
		}
		a.model = m
	}
	n := max(s.Count, 1)
	it := item{}
	switch {
	case s.DeviceClassName == allocator.DRAClassGPU:
		it.whole = true
	case s.DeviceClassName == allocator.DRAClassShare:
		if s.Capacity != nil {
			for name, q := range s.Capacity.Requests {
				if name != allocator.DRACapacityMemory {
					return a, false
				}
				it.memory = q.Value()
			}
		}
	case strings.HasPrefix(s.DeviceClassName, "mig-") && strings.HasSuffix(s.DeviceClassName, allocator.DRAClassSuffix):
		a.migClass, a.migs = s.DeviceClassName, n
		return a, true
	default:
		return a, false
	}
	for range n {
		a.items = append(a.items, it)
	}
	return a, true
}

// modelPrefix is the model selector of gpuadmit's alternatives up to the
// model (pkg/claim.ModelSelector writes it).
var modelPrefix = fmt.Sprintf("device.attributes[%q].%s == ", allocator.DRADriver, allocator.DRAAttrModel)

// selectedModel is the model a CEL selector written by
// pkg/claim.ModelSelector selects; false for any other expression.
func selectedModel(expr string) (string, bool) {
	rest, ok := strings.CutPrefix(expr, modelPrefix)
	if !ok {
		return "", false
	}
	m, err := strconv.Unquote(rest)
	return m, err == nil && m != ""
}

// prediction is what the allocator gives a pod on a node: the alternative
// of each choice (its index), and the items they take with the GPU (index
// in the view) of each.
type prediction struct {
	alts  []int
	items []item
	at    []int
	steps int // the sum of alts
}

// maxSearch bounds the steps of predict's search: a pod whose search takes
// more is not scored on the node, rather than stall the cycle.
const maxSearch = 10000

// predict is the allocation of cs on the node of view v (see the top of
// this file); false when none fits, the node is of more than one model,
// or the search ran past maxSearch.
func (v *gpuView) predict(cs []choice) (prediction, bool) {
	var s search
	return s.run(v, cs)
}

// search is predict's depth-first search, in the allocator's order. A
// scorer keeps one and runs it on node after node, so that a cycle's
// predictions reuse its buffers rather than allocate each its own.
type search struct {
	v     *gpuView
	left  []int64
	taken map[string]int64 // MIG devices taken, by class; nil until one is
	cs    []choice
	p     prediction
	steps int
}

// run is predict with s's buffers: the prediction is good until s's next
// run.
func (s *search) run(v *gpuView, cs []choice) (prediction, bool) {
	s.v, s.cs, s.steps = v, cs, 0
	s.left = append(s.left[:0], v.left...)
	clear(s.taken)
	s.p = prediction{alts: s.p.alts[:0], items: s.p.items[:0], at: s.p.at[:0]}
	defer func() { s.v, s.cs = nil, nil }() // keep no node's view past the run
	if !s.choice(0) {
		return prediction{}, false
	}
	for _, a := range s.p.alts {
		s.p.steps += a
	}
	return s.p, true
}

// choice places choices i onwards; true when all are placed.
func (s *search) choice(i int) bool {
	if i == len(s.cs) {
		return true
	}
	for a, alt := range s.cs[i] {
		if s.steps++; s.steps > maxSearch {
			return false
		}
		if alt.model != "" && alt.model != s.v.model {
			continue
		}
		if alt.migs > 0 {
			if s.v.mig[alt.migClass]-s.taken[alt.migClass] < alt.migs {
				continue
			}
			if s.taken == nil {
				s.taken = map[string]int64{}
			}
			s.taken[alt.migClass] += alt.migs
		}
		n := len(s.p.items)
		s.p.alts = append(s.p.alts, a)
		if s.place(i, alt.items) {
			return true
		}
		s.p.alts, s.p.items, s.p.at = s.p.alts[:i], s.p.items[:n], s.p.at[:n]
		if alt.migs > 0 {
			s.taken[alt.migClass] -= alt.migs
		}
	}
	return false
}

// place places items of choice i, each on a GPU in slice order that has
// room, then the choices after i.
func (s *search) place(i int, items []item) bool {
	if len(items) == 0 {
		return s.choice(i + 1)
	}
	need := s.v.shape.take(items[0])
	if need <= 0 {
		return false
	}
	for g, l := range s.left {
		if l < need {
			continue
		}
		if s.steps++; s.steps > maxSearch {
			return false
		}
		s.left[g] -= need
		s.p.items, s.p.at = append(s.p.items, items[0]), append(s.p.at, g)
		if s.place(i, items[1:]) {
			return true
		}
		s.left[g] += need
		s.p.items, s.p.at = s.p.items[:len(s.p.items)-1], s.p.at[:len(s.p.at)-1]
	}
	return false
}

// scoreChoices is the raw score of r, a request of choices, on node n of
// view v: the score of the predicted items on the GPUs predicted, less
// altStep for each step down the lists. A prediction of MIG devices only
// is scored as a pod without GPU (MIG instances are not in the view).
func (c *scorer) scoreChoices(n fwk.NodeInfo, r request, v *gpuView) (raw float64, milli int64, ok bool) {
	if v == nil {
		return 0, 0, false
	}
	p, ok := c.search.run(v, r.choices)
	if !ok {
		return 0, 0, false
	}
	placed := r
	placed.choices, placed.choiceKey, placed.items = nil, "", p.items
	raw, milli, ok = c.scoreAt(n, placed, v, p.at)
	return raw - altStep*float64(p.steps), milli, ok
}
