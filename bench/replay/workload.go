package replay

import (
	"fmt"

	"github.com/gpuadmit/gpuadmit/bench/packing"
)

// Workload is what one replay places: the trace's nodes and the pods that
// arrive until the GPU they ask for first reaches the cluster's capacity.
type Workload struct {
	Nodes []packing.Node
	// Listed is the trace's pod list, which the simulator's policies learn
	// their target workload from (as packing.RunStudy has them do).
	Listed []packing.Pod
	// Pods is the pod list inflated to 130% of capacity and shuffled, cut
	// at 100% arrived: the pods replayed, in order.
	Pods []packing.Pod
}

// LoadWorkload reads the trace's nodes (a seeded sample of nodes of them
// when 0 < nodes < all) and the pod list name, inflated and shuffled by seed
// against the capacity of those nodes as packing.RunStudy does.
func LoadWorkload(trace, name string, seed uint64, nodes int) (Workload, error) {
	all, err := packing.LoadNodes(trace, "")
	if err != nil {
		return Workload{}, fmt.Errorf("load cluster: %w", err)
	}
	pods, err := packing.LoadPods(trace, name)
	if err != nil {
		return Workload{}, fmt.Errorf("load workload: %w", err)
	}
	w := Workload{Nodes: packing.SampleNodes(all, nodes, seed), Listed: pods}
	capacity := w.Capacity()
	w.Pods = untilArrived(packing.Inflate(pods, capacity, packing.Ratio, seed), capacity)
	return w, nil
}

// untilArrived is the prefix of pods up to and including the pod at which
// the GPU asked for first reaches capacity, the pod after which
// packing.Tally records the 100% point.
func untilArrived(pods []packing.Pod, capacity int64) []packing.Pod {
	var arrived int64
	for i, p := range pods {
		if arrived += p.GPUMilliTotal(); arrived >= capacity {
			return pods[:i+1]
		}
	}
	return pods
}

// Capacity is the cluster's GPU capacity in milli-GPU.
func (w Workload) Capacity() int64 { return packing.NewCluster(w.Nodes).CapacityMilli() }
