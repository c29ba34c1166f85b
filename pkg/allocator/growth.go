package allocator

import (
	"math"
	"slices"
	"strings"
)

// FragMemo computes Fragmentation over one target workload's task kinds and
// remembers it by node state: nodes of one shape in one state (idle nodes
// of a pool, say) cost one computation, not one each. It is not safe for
// concurrent use.
type FragMemo struct {
	kinds  *kindSet
	memo   map[fragKey]float64
	models map[string]uint8 // the models in keys, numbered
	// Limit bounds the states remembered (about 80 bytes each); the memo
	// starts over when full. Zero means DefaultMemoLimit.
	Limit int
}

// maxGPUsPerNode bounds the GPUs a memoized state holds; larger nodes are
// computed every time.
const maxGPUsPerNode = 16

// DefaultMemoLimit is FragMemo's default bound: a million states, about
// 80 MB, which the simulator's single memo fills over a study.
const DefaultMemoLimit = 1 << 20

// fragKey is a node state up to what fragmentation does not depend on: the
// order of its GPUs, and its CPU and memory beyond the kinds' figures they
// reach (kindSet.classes), so that nodes whose CPU left differs by a few
// cores share an entry. Small, and free of pointers, so that hashing it is
// cheap and the garbage collector need not scan the memo. A GPU's milli-GPU
// left fits int16; the model is its number in FragMemo.models.
type fragKey struct {
	cpu, mem int64 // classes
	n, model uint8
	left     [maxGPUsPerNode]int16
}

// NewFragMemo returns a memo for the task kinds tasks.
func NewFragMemo(tasks []FragTask) *FragMemo {
	return &FragMemo{kinds: newKindSet(tasks), memo: map[fragKey]float64{}, models: map[string]uint8{}}
}

// Tasks returns the task kinds the memo computes fragmentation over.
func (m *FragMemo) Tasks() []FragTask { return m.kinds.tasks }

// Fragmentation is Fragmentation(n, m.Tasks()).
func (m *FragMemo) Fragmentation(n FragNode) float64 {
	k, ok := m.key(n)
	if !ok {
		return m.kinds.fragmentation(n)
	}
	if f, ok := m.memo[k]; ok {
		return f
	}
	limit := m.Limit
	if limit <= 0 {
		limit = DefaultMemoLimit
	}
	if len(m.memo) >= limit {
		clear(m.memo)
	}
	f := m.kinds.fragmentation(n)
	m.memo[k] = f
	return f
}

// key is n's memo key; ok is false for a node the key cannot hold (too
// many GPUs, a GPU's left out of range, too many models), which is
// computed every time.
func (m *FragMemo) key(n FragNode) (fragKey, bool) {
	if len(n.GPUMilliLeft) > maxGPUsPerNode {
		return fragKey{}, false
	}
	model, ok := m.models[n.Model]
	if !ok {
		if len(m.models) > math.MaxUint8 {
			return fragKey{}, false
		}
		model = uint8(len(m.models))
		m.models[strings.Clone(n.Model)] = model // a copy, so that n does not leak to the heap
	}
	cpu, mem := m.kinds.classes(n)
	k := fragKey{cpu: cpu, mem: mem, n: uint8(len(n.GPUMilliLeft)), model: model}
	for i, l := range n.GPUMilliLeft {
		if l < math.MinInt16 || l > math.MaxInt16 {
			return fragKey{}, false
		}
		k.left[i] = int16(l)
	}
	slices.Sort(k.left[:k.n])
	return k, true
}

// Growth is how much placing task req on n grows n's fragmentation, in
// milli-GPU (negative when it shrinks), with the GPUs req gets: whole GPUs
// are n's first idle GPUs by index; a share goes on the GPU where the growth
// is least, ties going to the GPU with least left (best fit). before is n's
// current fragmentation (m.Fragmentation(n)), passed in so callers may cache
// it. ok is false when req does not fit n's GPUs.
func (m *FragMemo) Growth(n FragNode, before float64, req FragTask) (growth float64, gpus []int, ok bool) {
	after := FragNode{MilliCPULeft: n.MilliCPULeft - req.MilliCPU, MemoryMiBLeft: n.MemoryMiBLeft - req.MemoryMiB,
		GPUMilliLeft: append(make([]int64, 0, maxGPUsPerNode), n.GPUMilliLeft...), Model: n.Model}
	if req.GPUs == 0 {
		return m.Fragmentation(after) - before, nil, true
	}
	if req.GPUs > 1 || req.GPUMilli >= MilliPerGPU {
		for i, left := range n.GPUMilliLeft {
			if len(gpus) == req.GPUs {
				break
			}
			if left >= MilliPerGPU {
				gpus = append(gpus, i)
				after.GPUMilliLeft[i] -= req.GPUMilli
			}
		}
		if len(gpus) < req.GPUs {
			return 0, nil, false
		}
		return m.Fragmentation(after) - before, gpus, true
	}
	best := -1
	for i, left := range n.GPUMilliLeft {
		// GPUs with as much left give the same state: try the first only.
		if left < req.GPUMilli || slices.Contains(n.GPUMilliLeft[:i], left) {
			continue
		}
		after.GPUMilliLeft[i] -= req.GPUMilli
		g := m.Fragmentation(after) - before
		after.GPUMilliLeft[i] += req.GPUMilli
		if best < 0 || g < growth || (g == growth && left < n.GPUMilliLeft[best]) {
			best, growth = i, g
		}
	}
	if best < 0 {
		return 0, nil, false
	}
	return growth, []int{best}, true
}

// strandWeight weighs Placer's stranding term against fragmentation growth
// (both in milli-GPU). Chosen on the openb default trace, seeds 42–44; see
// docs/benchmarks.md.
const strandWeight = 0.3

// Placer is gpuadmit's placement cost, in milli-GPU, the sum of three terms:
//
//   - the growth of the node's expected fragmentation (FragMemo.Growth);
//   - the growth of the GPU it strands for want of CPU, weighted by
//     strandWeight. A node strands the idle GPU its CPU left cannot feed at
//     the workload's CPU per GPU: FGD's fragmentation only sees CPU once a
//     kind no longer fits, one pod too late;
//   - the price of the GPUs taken, Scarcity of the node's model per
//     milli-GPU, once SetSupply has told the placer the cluster's GPUs.
type Placer struct {
	*FragMemo
	// CPUPerGPU is the workload's milli-CPU per whole GPU asked for,
	// CPU-only kinds included (their CPU competes for the same nodes).
	CPUPerGPU float64
	scarcity  map[string]float64
}

// SetSupply gives p the cluster's GPUs per model, from which it prices the
// GPUs that the workload's pinned kinds need (Scarcity). Until it is called,
// or when no kind is pinned, no GPU is priced.
func (p *Placer) SetSupply(gpus map[string]int) {
	p.scarcity = Scarcity(p.Tasks(), gpus)
}

// Scarcity is the price per milli-GPU of a GPU of model, as the function
// Scarcity computes it from the supply SetSupply was given; 0 before.
func (p *Placer) Scarcity(model string) float64 { return p.scarcity[model] }

// price is what the GPUs req takes on n cost.
func (p *Placer) price(n FragNode, req FragTask) float64 {
	return p.scarcity[n.Model] * float64(req.GPUMilliTotal())
}

// NewPlacer returns the placement cost over the task kinds tasks.
func NewPlacer(tasks []FragTask) *Placer {
	var cpu, gpu float64
	for _, t := range tasks {
		cpu += t.Weight * float64(t.MilliCPU)
		gpu += t.Weight * float64(t.GPUMilliTotal()) / MilliPerGPU
	}
	p := &Placer{FragMemo: NewFragMemo(tasks)}
	if gpu > 0 {
		p.CPUPerGPU = cpu / gpu
	}
	return p
}

// Cost is the cost of placing req on n, lower is better, and the GPUs req
// gets (see FragMemo.Growth); before is m.Fragmentation(n). ok is false
// when req does not fit n's GPUs.
func (p *Placer) Cost(n FragNode, before float64, req FragTask) (cost float64, gpus []int, ok bool) {
	cost, gpus, ok = p.Growth(n, before, req)
	if !ok {
		return cost, gpus, ok
	}
	return cost + p.strandGrowth(n, req) + p.price(n, req), gpus, true
}

// CostOn is the cost of placing req on n's GPUs gpus, which someone else
// chose: a scheduler that picks the node but not the GPU (the DRA
// allocator's first fit, a device plugin's best fit) pays this, not Cost.
// gpus lists one GPU per GPU req asks for (none for a task without GPU);
// ok is false when they are not that many distinct GPUs of n each with
// req.GPUMilli left.
func (p *Placer) CostOn(n FragNode, before float64, req FragTask, gpus []int) (cost float64, ok bool) {
	if len(gpus) != req.GPUs {
		return 0, false
	}
	after := FragNode{MilliCPULeft: n.MilliCPULeft - req.MilliCPU, MemoryMiBLeft: n.MemoryMiBLeft - req.MemoryMiB,
		GPUMilliLeft: append(make([]int64, 0, maxGPUsPerNode), n.GPUMilliLeft...), Model: n.Model}
	for i, g := range gpus {
		if g < 0 || g >= len(after.GPUMilliLeft) || after.GPUMilliLeft[g] < req.GPUMilli || slices.Contains(gpus[:i], g) {
			return 0, false
		}
		after.GPUMilliLeft[g] -= req.GPUMilli
	}
	return p.Fragmentation(after) - before + p.strandGrowth(n, req) + p.price(n, req), true
}

// strandGrowth is the weighted growth of the GPU n strands for want of CPU
// when req is placed on it.
func (p *Placer) strandGrowth(n FragNode, req FragTask) float64 {
	if p.CPUPerGPU <= 0 {
		return 0
	}
	idle := float64(sum(n.GPUMilliLeft))
	after := p.stranded(n.MilliCPULeft-req.MilliCPU, idle-float64(req.GPUMilliTotal()))
	return strandWeight * (after - p.stranded(n.MilliCPULeft, idle))
}

// stranded is the milli-GPU of idle that cpu milli-CPU cannot feed.
func (p *Placer) stranded(cpu int64, idle float64) float64 {
	return max(0, idle-MilliPerGPU*float64(cpu)/p.CPUPerGPU)
}
