package replay

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpuadmit/gpuadmit/bench/packing"
	"github.com/gpuadmit/gpuadmit/pkg/report"
	"github.com/gpuadmit/gpuadmit/pkg/usage"
)

// UsagePoint is what gpuadmit's usage metrics say of the replay cluster
// when the GPU asked by the pods arrived so far first reaches Arrived of
// the cluster's capacity (packing.Tally's points): the figures of
// usage.Compute, the code the webhook's leader exports, summed over the
// pools. Memory is MiB of the replay's GPUs, 1000 to a GPU, so one MiB is
// one milli-GPU of the trace.
type UsagePoint struct {
	Arrived          float64 `json:"arrived"`
	Pods             int     `json:"pods"` // arrived so far, GPU or not
	CapacityMiB      int64   `json:"capacityMiB"`
	AllocatedMiB     int64   `json:"allocatedMiB"`
	FreeMiB          int64   `json:"freeMiB"`
	StrandedMiB      int64   `json:"strandedMiB"`
	FragmentationMiB float64 `json:"fragmentationMiB"`
	PendingPods      int64   `json:"pendingPods"` // GPU pods
	PendingMiB       int64   `json:"pendingMiB"`
	// StrandedAllPodsMiB is stranded with the CPU and memory of the pods
	// without GPU taken from their nodes too (usage.Input.Others): the
	// leader does not cache those pods, so StrandedMiB, its figure, is a
	// lower bound, and this is how far below it is.
	StrandedAllPodsMiB int64 `json:"strandedAllPodsMiB"`
	// StrandedPolicySizesMiB is stranded as the leader counts it, with
	// UsageOptions.PolicySizes for typical sizes instead: how much the
	// figure owes to the sizes an operator lists.
	StrandedPolicySizesMiB int64 `json:"strandedPolicySizesMiB"`
}

// UsageOptions say what UsageTrace counts stranded memory against.
type UsageOptions struct {
	// Sizes are the typical sizes of the trace's figures; the replay
	// takes TypicalSizes of the pod list.
	Sizes []usage.Size
	// PolicySizes are the typical sizes of StrandedPolicySizesMiB; the
	// replay takes PolicySizes.
	PolicySizes []usage.Size
	// At are the arrival points; nil means UsageArrived.
	At []float64
}

// PolicySizes are the typical sizes of the default policy data (8, 20 and
// 40 GiB of GPU memory with 2, 4 and 8 CPUs and 16, 32 and 64 GiB of
// memory) with the GPU memory as the share of an 80 GiB GPU, in the
// replay's 1000 MiB GPUs: 100, 250 and 500 MiB.
func PolicySizes() []usage.Size {
	return []usage.Size{
		{GPUMemoryMiB: 100, GPUs: 1, MilliCPU: 2000, MemoryMiB: 16 << 10},
		{GPUMemoryMiB: 250, GPUs: 1, MilliCPU: 4000, MemoryMiB: 32 << 10},
		{GPUMemoryMiB: 500, GPUs: 1, MilliCPU: 8000, MemoryMiB: 64 << 10},
	}
}

// StrandedPct is stranded memory as a percentage of capacity.
func (u UsagePoint) StrandedPct() float64 { return pct(u.StrandedMiB, u.CapacityMiB) }

// FragmentationPct is the fragmentation measure as a percentage of capacity.
func (u UsagePoint) FragmentationPct() float64 {
	if u.CapacityMiB == 0 {
		return 0
	}
	return 100 * u.FragmentationMiB / float64(u.CapacityMiB)
}

func pct(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

// UsageArrived are the points of the usage trace: 2% to 100% arrived in
// steps of 2%.
func UsageArrived() []float64 {
	var out []float64
	for p := 2; p <= 100; p += 2 {
		out = append(out, float64(p)/100)
	}
	return out
}

// Cluster is the replay cluster as the API server holds it once every pod
// is bound or unschedulable.
type Cluster struct {
	Nodes  []corev1.Node
	Slices []resourceapi.ResourceSlice
	Pods   []corev1.Pod
	Claims []resourceapi.ResourceClaim
}

// UsageTrace computes the usage figures of c at each point of at, in
// arrival order: at a point, the cluster holds the pods arrived so far,
// each bound where it was bound or pending as it stayed, with their
// claims, and the nodes and slices as they are. The scheduler takes the
// pods in the order they were created, and resources only shrink, so that
// is the cluster as it stood when that pod had arrived and been scheduled;
// at 100% it is c itself.
func UsageTrace(w Workload, c Cluster, o UsageOptions) ([]UsagePoint, error) {
	at := o.At
	if at == nil {
		at = UsageArrived()
	}
	byIndex := make([]*corev1.Pod, len(w.Pods))
	for i := range c.Pods {
		k := podIndex(c.Pods[i].Name)
		if k < 0 || k >= len(w.Pods) {
			return nil, fmt.Errorf("pod %s is not one of the workload's", c.Pods[i].Name)
		}
		byIndex[k] = &c.Pods[i]
	}
	claims := make(map[string]resourceapi.ResourceClaim, len(c.Claims))
	for _, cl := range c.Claims {
		claims[cl.Name] = cl
	}
	capacity := w.Capacity()
	var out []UsagePoint
	var arrived int64
	objs := report.Objects{Slices: c.Slices}
	for i, p := range w.Pods {
		if byIndex[i] == nil {
			return nil, fmt.Errorf("pod %d of the workload (%s) is not in the cluster", i, PodName(i, p))
		}
		objs.Pods = append(objs.Pods, byIndex[i])
		if cl, ok := claims[byIndex[i].Name]; ok {
			objs.Claims = append(objs.Claims, cl)
		}
		arrived += p.GPUMilliTotal()
		for len(out) < len(at) && float64(arrived) >= at[len(out)]*float64(capacity) {
			out = append(out, usagePoint(at[len(out)], c.Nodes, objs, o))
		}
	}
	return out, nil
}

// usagePoint computes the figures of the nodes and objs as the leader sees
// them (gpuadmit's pods only), then stranded with the other pods' CPU and
// memory, then stranded with the policy's sizes.
func usagePoint(arrived float64, nodes []corev1.Node, objs report.Objects, o UsageOptions) UsagePoint {
	in := report.Input(nodes, objs, usage.Config{Sizes: o.Sizes})
	all := usage.Compute(in)
	in.Others = nil
	u := sumPools(usage.Compute(in))
	u.Arrived, u.Pods = arrived, len(objs.Pods)
	u.StrandedAllPodsMiB = sumPools(all).StrandedMiB
	in.Config.Sizes = o.PolicySizes
	u.StrandedPolicySizesMiB = sumPools(usage.Compute(in)).StrandedMiB
	return u
}

// sumPools sums the report's pools into one point.
func sumPools(r usage.Report) UsagePoint {
	var u UsagePoint
	for _, p := range r.Pools {
		u.CapacityMiB += p.CapacityMiB
		u.FreeMiB += p.FreeMiB
		u.StrandedMiB += p.StrandedMiB
		u.FragmentationMiB += p.FragmentationMiB
		for _, mib := range p.Allocated {
			u.AllocatedMiB += mib
		}
		for _, n := range p.Pending {
			u.PendingPods += n.Pods
			u.PendingMiB += n.MiB
		}
	}
	return u
}

// TypicalSizes are the distinct GPU requests of the trace's pod list, with
// their CPU and memory, as the policy data's typical sizes: free GPU
// memory that no pod of the list and no pending pod could use is stranded.
// The default policy data's sizes (8, 20, 40 GiB) would fit no GPU of the
// replay, whose GPUs have 1000 MiB.
func TypicalSizes(listed []packing.Pod) []usage.Size {
	seen := map[usage.Size]bool{}
	var out []usage.Size
	for _, p := range listed {
		if p.GPUs == 0 {
			continue
		}
		s := usage.Size{GPUMemoryMiB: p.GPUMilli, GPUs: int64(p.GPUs), MilliCPU: p.MilliCPU, MemoryMiB: p.MemoryMiB}
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b usage.Size) int {
		return cmp.Or(cmp.Compare(a.GPUMemoryMiB, b.GPUMemoryMiB), cmp.Compare(a.GPUs, b.GPUs),
			cmp.Compare(a.MilliCPU, b.MilliCPU), cmp.Compare(a.MemoryMiB, b.MemoryMiB))
	})
	return out
}
