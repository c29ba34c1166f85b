package allocator

import "strings"

// MilliPerGPU is the share of one GPU that a whole GPU is worth in the
// fragmentation model: a task asks for GPUMilli per GPU, 1000 being a whole GPU.
const MilliPerGPU = 1000

// FragNode is what fragmentation reads of a node: the CPU and memory left,
// the milli-GPU left on each GPU, and the GPU model. FGD (Weng et al.,
// ATC'23, §4) reads no memory; memory counts only for tasks that ask for it.
type FragNode struct {
	MilliCPULeft  int64
	MemoryMiBLeft int64
	GPUMilliLeft  []int64
	Model         string
}

// FragTask is one kind of task of the target workload and its weight
// (popularity, summing to 1 over the workload). GPUMilli is per GPU: a
// sharing task has GPUs 1 and GPUMilli < 1000; a task without GPU has 0.
// Spec lists the GPU models the task accepts, separated by '|'; empty accepts any.
// MemoryMiB 0 means the kind's memory is not considered (FGD's model).
type FragTask struct {
	MilliCPU  int64
	MemoryMiB int64
	GPUMilli  int64
	GPUs      int
	Spec      string
	Weight    float64
}

// GPUMilliTotal is the milli-GPU the task asks for on all its GPUs.
func (t FragTask) GPUMilliTotal() int64 { return t.GPUMilli * int64(t.GPUs) }

// Fragmentation is FGD's expected fragmentation of a node over the target
// workload, in milli-GPU: the weighted sum over task kinds of TaskFragment.
// A node without idle GPU has none.
func Fragmentation(n FragNode, tasks []FragTask) float64 {
	left := sum(n.GPUMilliLeft)
	if left == 0 {
		return 0
	}
	var f float64
	for _, t := range tasks {
		f += t.Weight * float64(taskFragment(n, t, left))
	}
	return f
}

// TaskFragment is the milli-GPU idle on n that task t cannot use. When t
// cannot run on n at all (no GPU asked, model refused, CPU or memory short,
// or too few GPUs with enough left), every idle GPU share is a fragment;
// otherwise only the GPUs with less left than t asks per GPU are.
func TaskFragment(n FragNode, t FragTask) int64 {
	return taskFragment(n, t, sum(n.GPUMilliLeft))
}

func taskFragment(n FragNode, t FragTask, left int64) int64 {
	if n.MilliCPULeft < t.MilliCPU || n.MemoryMiBLeft < t.MemoryMiB {
		return left
	}
	if frag := shapeFragment(n, shapeOf(t)); frag >= 0 {
		return frag
	}
	return left
}

// ModelAllowed reports whether a GPU of model may serve a task whose spec
// lists the accepted models separated by '|'. An empty spec accepts any
// model; a node without a model (no GPU) serves no spec.
func ModelAllowed(spec, model string) bool {
	if spec == "" {
		return true
	}
	if model == "" {
		return false
	}
	for spec != "" {
		var m string
		m, spec, _ = strings.Cut(spec, "|")
		if m == model {
			return true
		}
	}
	return false
}

func gpusFit(left []int64, milli int64, count int) bool {
	for _, g := range left {
		if g >= milli {
			count--
		}
	}
	return count <= 0
}

func sum(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}
