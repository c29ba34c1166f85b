package packing

import (
	"context"
	"slices"
)

// PinOrder is how the webhook picks the one pool of a pod among its
// candidates that have room, where the pool's resource name is fixed at
// admission (device-plugin and extended-resource pools).
type PinOrder int

const (
	// PinPolicyOrder takes the first candidate in the policy's order: the
	// default policies put the least GPU memory first. What the webhook
	// does today.
	PinPolicyOrder PinOrder = iota
	// PinMostFree takes the model with the most free GPU.
	PinMostFree
	// PinScarcity takes the model of least price, pressure over free GPU,
	// the pressure being the GPU of the pods that wait (here: those that
	// fit nowhere), each spread evenly over the models it accepts
	// (docs/placement.md, the webhook's pick by scarcity).
	PinScarcity
	// PinExpected is PinScarcity with, in the pressure, the GPU the
	// workload's pinned kinds are still expected to need on the model
	// (allocator.Scarcity's expected need, less what pinned pods already
	// took there): a webhook that learns which models its pods accept.
	PinExpected
)

// Pinned is the product's path on pools the webhook pins: the webhook pins
// each pod to one GPU model (pool) among its candidates that have room on
// one whole node (GPU, CPU and memory of one node hold the pod), picked by
// order; the candidates are those of the default policies (ProductDeriver),
// and a pod that fits no node's model waits. Then the scheduler places it
// with gpuadmit's score (GPUAdmit) inside that model.
type Pinned struct {
	*GPUAdmit
	deriver *ProductDeriver
	order   PinOrder
	// cur are the models the pod being placed accepts, in the policy's
	// order; curPinned is whether its gpu_spec names models.
	cur       []string
	curPinned bool
	waiting   map[string]float64 // milli-GPU of waiting pods, by model
	need      map[string]float64 // pinned kinds' expected milli-GPU left, by model
}

// pinOrders names the orders in policy names: "pinned-expected+names" is
// PinExpected with every model's GPU memory equal, so that the policy's
// order falls back to the pools' names, as in the replay (ByName).
var pinOrders = map[string]PinOrder{"pinned": PinPolicyOrder, "pinned-mostfree": PinMostFree,
	"pinned-scarcity": PinScarcity, "pinned-expected": PinExpected}

// NewPinned learns the workload as NewGPUAdmit does and derives the
// candidates of every kind of pod as NewProduct does.
func NewPinned(workload []Pod, nodes []Node, order PinOrder) (*Pinned, error) {
	return newPinned(workload, nodes, order, TraceGPUMemoryMiB)
}

// newPinned is NewPinned with each model's GPU memory from mib.
func newPinned(workload []Pod, nodes []Node, order PinOrder, mib map[string]int64) (*Pinned, error) {
	d, err := newProductDeriver(context.Background(), nodes, mib)
	if err != nil {
		return nil, err
	}
	if err := d.check(workload); err != nil {
		return nil, err
	}
	g := NewGPUAdmit(workload, nodes)
	p := &Pinned{GPUAdmit: g, deriver: d, order: order, waiting: map[string]float64{}, need: map[string]float64{}}
	if order == PinExpected {
		for m, gpus := range Supply(nodes) {
			p.need[m] = g.placer.Scarcity(m) * float64(gpus) * milliPerGPU
		}
	}
	return p, nil
}

// modelRoom is what the webhook reads of one model's pool.
type modelRoom struct {
	room bool    // one node holds the pod
	free float64 // milli-GPU free on the model's nodes
}

// Admit pins p to one model of its candidates by the order.
func (g *Pinned) Admit(c *Cluster, p Pod) (Pod, bool) {
	g.cur, g.curPinned = nil, p.Spec != ""
	if p.GPUs == 0 {
		return p, true
	}
	_, own, err := g.deriver.own(p)
	if err != nil {
		return p, false
	}
	for _, a := range own {
		if !slices.Contains(g.cur, a.Model) {
			g.cur = append(g.cur, a.Model)
		}
	}
	rooms := g.rooms(c, p)
	pick, best := g.cur[0], 0.0
	found := false
	for i, m := range g.cur {
		r := rooms[i]
		if !r.room {
			continue
		}
		if v := g.value(m, r); !found || v < best {
			pick, best, found = m, v, true
		}
	}
	p.Spec = pick
	return p, true
}

// value ranks a model with room, lowest first; ties keep the policy's order.
func (g *Pinned) value(m string, r modelRoom) float64 {
	switch g.order {
	case PinMostFree:
		return -r.free
	case PinScarcity:
		return g.waiting[m] / r.free
	case PinExpected:
		return (max(g.need[m], 0) + g.waiting[m]) / r.free
	}
	return 0
}

// rooms reads, for each model p accepts (g.cur, in its order), whether
// one node holds p and the GPU free on its nodes.
func (g *Pinned) rooms(c *Cluster, p Pod) []modelRoom {
	out := make([]modelRoom, len(g.cur))
	for _, n := range c.Nodes {
		i := slices.Index(g.cur, n.Model)
		if n.GPUs == 0 || i < 0 {
			continue
		}
		out[i].free += float64(n.GPUMilliLeft())
		if !out[i].room {
			q := p
			q.Spec = n.Model
			out[i].room = n.Fits(q)
		}
	}
	return out
}

// Placed counts a pod that fit nowhere as waiting on every model it
// accepts, and a pinned pod placed against its kind's expected need.
func (g *Pinned) Placed(p Pod, n *NodeState) {
	if p.GPUs == 0 || len(g.cur) == 0 {
		return
	}
	if n == nil {
		for _, m := range g.cur {
			g.waiting[m] += float64(p.GPUMilliTotal()) / float64(len(g.cur))
		}
		return
	}
	if g.curPinned {
		g.need[n.Model] -= float64(p.GPUMilliTotal())
	}
}
