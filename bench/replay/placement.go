package replay

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpuadmit/gpuadmit/bench/packing"
	"github.com/gpuadmit/gpuadmit/pkg/agent/dra"
)

// Placement is where one pod of the workload went: the node, and the index
// of each GPU its claim was given (none for a pod without GPU). Node is ""
// for a pod that stayed pending.
type Placement struct {
	Node string `json:"node,omitempty"`
	GPUs []int  `json:"gpus,omitempty"`
}

// Placements reads the placement of every pod of the workload from the
// pods and claims the API server holds: a pod's node from spec.nodeName,
// its GPUs from its claims' allocations (podClaims), checked against what
// the pod asked (devices of gpu.gpuadmit.io, one per GPU, a share
// consuming exactly its milli-GPU in MiB).
func Placements(pods []packing.Pod, objs []corev1.Pod, claims []resourceapi.ResourceClaim) ([]Placement, error) {
	out := make([]Placement, len(pods))
	byName := make(map[string]*resourceapi.ResourceClaim, len(claims))
	for i := range claims {
		byName[claims[i].Name] = &claims[i]
	}
	for _, o := range objs {
		i := podIndex(o.Name)
		if i < 0 || i >= len(pods) || o.Spec.NodeName == "" {
			continue
		}
		pl := Placement{Node: o.Spec.NodeName}
		if pods[i].GPUs > 0 {
			gpus, err := claimGPUs(podClaims(o, byName), o.Spec.NodeName, pods[i])
			if err != nil {
				return nil, fmt.Errorf("pod %s: %w", o.Name, err)
			}
			pl.GPUs = gpus
		}
		out[i] = pl
	}
	return out, nil
}

// podClaims are the claims of pod o: those the resourceclaim controller
// made from its templates and the scheduler's claim for extended resources
// a DeviceClass serves (both named in the pod's status), else the claim the
// bench created under the pod's own name. A claim the status names but
// byName lacks is nil.
func podClaims(o corev1.Pod, byName map[string]*resourceapi.ResourceClaim) []*resourceapi.ResourceClaim {
	var out []*resourceapi.ResourceClaim
	for _, s := range o.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			out = append(out, byName[*s.ResourceClaimName])
		}
	}
	if e := o.Status.ExtendedResourceClaimStatus; e != nil {
		out = append(out, byName[e.ResourceClaimName])
	}
	if len(out) == 0 {
		out = append(out, byName[o.Name])
	}
	return out
}

// claimGPUs is the GPU indexes of a bound pod's claims, which must be
// allocated on node as p asks.
func claimGPUs(cs []*resourceapi.ResourceClaim, node string, p packing.Pod) ([]int, error) {
	var gpus []int
	for _, c := range cs {
		g, err := allocatedGPUs(c, node, p)
		if err != nil {
			return nil, err
		}
		gpus = append(gpus, g...)
	}
	if len(gpus) != p.GPUs {
		return nil, fmt.Errorf("claims got %d GPUs, asked %d", len(gpus), p.GPUs)
	}
	return gpus, nil
}

// allocatedGPUs is the GPU indexes of one claim of a pod bound to node.
func allocatedGPUs(c *resourceapi.ResourceClaim, node string, p packing.Pod) ([]int, error) {
	if c == nil || c.Status.Allocation == nil {
		return nil, fmt.Errorf("bound to %s without an allocated claim", node)
	}
	var gpus []int
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Driver != dra.DriverName || r.Pool != node {
			return nil, fmt.Errorf("claim got %s/%s/%s, not a GPU of %s", r.Driver, r.Pool, r.Device, node)
		}
		g, ok := gpuIndex(r.Device)
		if !ok {
			return nil, fmt.Errorf("claim got device %s, not a GPU", r.Device)
		}
		if p.Shared() {
			got := r.ConsumedCapacity[dra.CapacityMemory]
			if got.Value() != p.GPUMilli<<20 {
				return nil, fmt.Errorf("share of %d milli-GPU consumed %s of %s", p.GPUMilli, got.String(), r.Device)
			}
		}
		gpus = append(gpus, g)
	}
	return gpus, nil
}

// gpuIndex reads the GPU index of a device name dra.GPUDeviceName wrote.
func gpuIndex(device string) (int, bool) {
	var i int
	if _, err := fmt.Sscanf(device, "gpu-%d", &i); err != nil || dra.GPUDeviceName(i) != device {
		return 0, false
	}
	return i, true
}

// Account replays placements, in workload order, onto bench/packing's
// model of nodes, refusing any that packing would not allow (CPU, memory,
// a GPU without the room the pod takes of it), and returns the allocation
// at each arrival point as the simulator counts it (packing.Tally; nil
// arrived means packing.DefaultArrived), and the placed and pending pods.
func Account(nodes []packing.Node, pods []packing.Pod, placed []Placement, arrived []float64) (points []packing.Point, bound, pending int, err error) {
	c := packing.NewCluster(nodes)
	byName := make(map[string]*packing.NodeState, len(c.Nodes))
	for _, n := range c.Nodes {
		byName[n.Name] = n
	}
	tally := packing.NewTally(c.CapacityMilli(), arrived)
	for i, p := range pods {
		pl := placed[i]
		if pl.Node == "" {
			tally.Add(p, false)
			pending++
			continue
		}
		n := byName[pl.Node]
		if n == nil {
			return nil, 0, 0, fmt.Errorf("pod %d (%s) on unknown node %s", i, p.Name, pl.Node)
		}
		if err := fits(n, p, pl.GPUs); err != nil {
			return nil, 0, 0, fmt.Errorf("pod %d (%s) on %s: %w", i, p.Name, pl.Node, err)
		}
		n.Assign(p, pl.GPUs)
		tally.Add(p, true)
		bound++
	}
	return tally.Points(), bound, pending, nil
}

// fits is packing's fit of p on n, on the GPUs gpus in particular.
func fits(n *packing.NodeState, p packing.Pod, gpus []int) error {
	if !n.Fits(p) {
		return fmt.Errorf("does not fit (CPU %d left, memory %d MiB, GPUs %v)", n.CPULeft, n.MemLeft, n.GPULeft)
	}
	if len(gpus) != p.GPUs {
		return fmt.Errorf("%d GPUs for a pod of %d", len(gpus), p.GPUs)
	}
	seen := map[int]bool{}
	for _, g := range gpus {
		if g < 0 || g >= len(n.GPULeft) || seen[g] || n.GPULeft[g] < p.GPUMilli {
			return fmt.Errorf("GPU %d has not %d milli-GPU left (%v)", g, p.GPUMilli, n.GPULeft)
		}
		seen[g] = true
	}
	return nil
}
