package allocator

import (
	"cmp"
	"slices"
	"strings"
)

// kindSet is a workload's task kinds arranged for Fragmentation: kinds that
// ask for the same GPU shape (milli-GPU per GPU, GPU count, accepted models)
// share one look at a node's GPUs, so a node costs one pass over its GPUs
// per shape and one comparison of CPU and memory per kind, not two passes
// over its GPUs per kind.
type kindSet struct {
	tasks []FragTask
	shape []int // shape[i] indexes shapes for tasks[i]
	// The tasks' CPU, memory and weight, in arrays of their own for the
	// loop over kinds that every fragmentation runs.
	cpu, mem []int64
	weight   []float64
	shapes   []gpuShape
	// byMilli lists the shapes by milli-GPU per GPU, largest first, for
	// one sweep over a node's GPUs sorted the same way.
	byMilli []int
	// frag is scratch, per shape: the fragment when a kind of that shape
	// can run on the node, or -1 when no kind of it can.
	frag []int64
	// cpuCuts and memCuts are the kinds' distinct CPU and memory, in
	// increasing order: fragmentation reads a node's CPU and memory only
	// by comparing them with these (see classes).
	cpuCuts, memCuts []int64
	// allowed caches, per GPU model, whether each shape accepts it; last
	// is the model looked up last.
	allowed map[string]*modelShapes
	last    *modelShapes
}

// modelShapes is whether each shape accepts GPUs of model.
type modelShapes struct {
	model string
	allow []bool
}

// gpuShape is what of a task kind its GPUs' fit depends on.
type gpuShape struct {
	milli int64
	gpus  int
	spec  string
}

func shapeOf(t FragTask) gpuShape {
	return gpuShape{milli: t.GPUMilli, gpus: t.GPUs, spec: t.Spec}
}

func newKindSet(tasks []FragTask) *kindSet {
	s := &kindSet{tasks: tasks, shape: make([]int, len(tasks)),
		cpu: make([]int64, len(tasks)), mem: make([]int64, len(tasks)), weight: make([]float64, len(tasks))}
	index := map[gpuShape]int{}
	for i, t := range tasks {
		s.cpu[i], s.mem[i], s.weight[i] = t.MilliCPU, t.MemoryMiB, t.Weight
		sh := shapeOf(t)
		j, ok := index[sh]
		if !ok {
			j = len(s.shapes)
			index[sh] = j
			s.shapes = append(s.shapes, sh)
		}
		s.shape[i] = j
	}
	s.cpuCuts, s.memCuts = cuts(s.cpu), cuts(s.mem)
	s.allowed = map[string]*modelShapes{}
	s.frag = make([]int64, len(s.shapes))
	s.byMilli = make([]int, len(s.shapes))
	for j := range s.byMilli {
		s.byMilli[j] = j
	}
	slices.SortStableFunc(s.byMilli, func(a, b int) int { return cmp.Compare(s.shapes[b].milli, s.shapes[a].milli) })
	return s
}

// fragmentation is Fragmentation(n, s.tasks), summed in the same order so
// that it is the same number to the last bit. It is not safe for
// concurrent use (the scratch).
func (s *kindSet) fragmentation(n FragNode) float64 {
	left := sum(n.GPUMilliLeft)
	if left == 0 {
		return 0
	}
	s.shapeFragments(n, left)
	var f float64
	cpu, mem, weight, shape := s.cpu, s.mem[:len(s.cpu)], s.weight[:len(s.cpu)], s.shape[:len(s.cpu)]
	for i, c := range cpu {
		frag := s.frag[shape[i]]
		if frag < 0 || n.MilliCPULeft < c || n.MemoryMiBLeft < mem[i] {
			frag = left
		}
		f += weight[i] * float64(frag)
	}
	return f
}

// shapeFragments fills s.frag with shapeFragment(n, shape) for every shape,
// in one sweep: with n's GPUs sorted by what they have left, largest
// first, the GPUs with at least a shape's milli-GPU left are a prefix, which
// only grows as the shapes' milli-GPU shrinks; a shape's fragment is what
// the GPUs past that prefix have left. left is the sum of n's GPUs' left.
func (s *kindSet) shapeFragments(n FragNode, left int64) {
	var buf [maxGPUsPerNode]int64
	g := buf[:0]
	if len(n.GPUMilliLeft) > len(buf) {
		g = make([]int64, 0, len(n.GPUMilliLeft))
	}
	g = append(g, n.GPUMilliLeft...)
	for i := 1; i < len(g); i++ { // insertion sort, largest first: a node has few GPUs
		for j := i; j > 0 && g[j] > g[j-1]; j-- {
			g[j], g[j-1] = g[j-1], g[j]
		}
	}
	allow := s.allows(n.Model)
	fits, fitLeft := 0, int64(0) // the GPUs with at least the shape's milli-GPU, and their sum
	for _, j := range s.byMilli {
		sh := s.shapes[j]
		if sh.milli == 0 {
			s.frag[j] = -1
			continue
		}
		for fits < len(g) && g[fits] >= sh.milli {
			fitLeft += g[fits]
			fits++
		}
		if fits < sh.gpus || !allow[j] {
			s.frag[j] = -1
			continue
		}
		s.frag[j] = left - fitLeft
	}
}

// allows is, for each shape, whether it accepts GPUs of model. It keeps
// copies of the models it saw, so that a node's model does not leak to the
// heap through it.
func (s *kindSet) allows(model string) []bool {
	if s.last != nil && model == s.last.model {
		return s.last.allow
	}
	m, ok := s.allowed[model]
	if !ok {
		m = &modelShapes{model: strings.Clone(model), allow: make([]bool, len(s.shapes))}
		for j, sh := range s.shapes {
			m.allow[j] = ModelAllowed(sh.spec, model)
		}
		s.allowed[m.model] = m
	}
	s.last = m
	return m.allow
}

// cuts is xs's distinct values in increasing order.
func cuts(xs []int64) []int64 {
	c := slices.Clone(xs)
	slices.Sort(c)
	return slices.Compact(c)
}

// classes is n's CPU and memory as fragmentation reads them: how many of
// the kinds' distinct CPU and memory figures they reach. Two nodes whose
// GPUs are alike and whose classes are the same have the same
// fragmentation, to the last bit: each kind compares the node's CPU and
// memory with its own, and those comparisons come out the same.
func (s *kindSet) classes(n FragNode) (cpu, mem int64) {
	return reached(s.cpuCuts, n.MilliCPULeft), reached(s.memCuts, n.MemoryMiBLeft)
}

// reached is how many of cuts (increasing) x reaches.
func reached(cuts []int64, x int64) int64 {
	i, found := slices.BinarySearch(cuts, x)
	if found {
		i++
	}
	return int64(i)
}

// shapeFragment is the milli-GPU idle on n that a task of shape sh cannot
// use when its CPU and memory fit (taskFragment), or -1 when it cannot run
// there whatever its CPU and memory: no GPU asked, model refused, or too
// few GPUs with enough left.
func shapeFragment(n FragNode, sh gpuShape) int64 {
	if sh.milli == 0 || !ModelAllowed(sh.spec, n.Model) || !gpusFit(n.GPUMilliLeft, sh.milli, sh.gpus) {
		return -1
	}
	var frag int64
	for _, g := range n.GPUMilliLeft {
		if g < sh.milli {
			frag += g
		}
	}
	return frag
}
