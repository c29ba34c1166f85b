package allocator

// kindSet is a workload's task kinds arranged for Fragmentation: kinds that
// ask for the same GPU shape (milli-GPU per GPU, GPU count, accepted models)
// share one look at a node's GPUs, so a node costs one pass over its GPUs
// per shape and one comparison of CPU and memory per kind, not two passes
// over its GPUs per kind.
type kindSet struct {
	tasks  []FragTask
	shape  []int // shape[i] indexes shapes for tasks[i]
	shapes []gpuShape
	// frag is scratch, per shape: the fragment when a kind of that shape
	// can run on the node, or -1 when no kind of it can.
	frag []int64
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
	s := &kindSet{tasks: tasks, shape: make([]int, len(tasks))}
	index := map[gpuShape]int{}
	for i, t := range tasks {
		sh := shapeOf(t)
		j, ok := index[sh]
		if !ok {
			j = len(s.shapes)
			index[sh] = j
			s.shapes = append(s.shapes, sh)
		}
		s.shape[i] = j
	}
	s.frag = make([]int64, len(s.shapes))
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
	for j, sh := range s.shapes {
		s.frag[j] = shapeFragment(n, sh)
	}
	var f float64
	for i, t := range s.tasks {
		frag := s.frag[s.shape[i]]
		if frag < 0 || n.MilliCPULeft < t.MilliCPU || n.MemoryMiBLeft < t.MemoryMiB {
			frag = left
		}
		f += t.Weight * float64(frag)
	}
	return f
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
