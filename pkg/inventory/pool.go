package inventory

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// Mode is how a pool serves GPU.
type Mode string

const (
	// MIGMixed pools serve nvidia.com/mig-<profile> resources.
	MIGMixed Mode = "mig-mixed"
	// MIGSingle pools serve one MIG profile as nvidia.com/gpu.
	MIGSingle Mode = "mig-single"
	// Shared pools serve GPU memory shares (gpuadmit.io/gpu-mem).
	Shared Mode = "shared"
	// Whole pools serve whole GPUs as nvidia.com/gpu.
	Whole Mode = "whole"
	// TimeSliced pools serve replicas of GPUs that NVIDIA's device plugin
	// time-slices (GFD's nvidia.com/gpu.replicas > 1, a -SHARED product, or
	// the renamed nvidia.com/gpu.shared resource): a replica is neither a
	// whole GPU nor a memory share, since every replica of a GPU sees all
	// of its memory and compute, isolated from none of the others.
	TimeSliced Mode = "time-sliced"
)

// Node labels, resources and defaults the inventory reads.
const (
	LabelPool        = "gpuadmit.io/pool"
	LabelProduct     = "nvidia.com/gpu.product"
	LabelMemory      = "nvidia.com/gpu.memory"
	LabelCount       = "nvidia.com/gpu.count"
	LabelMIGStrategy = "nvidia.com/mig.strategy"
	// LabelReplicas is GFD's count of time-slicing replicas per GPU.
	LabelReplicas = "nvidia.com/gpu.replicas"
	// sharedSuffix ends the product label of a time-sliced GPU when the
	// device plugin keeps the nvidia.com/gpu name (renameByDefault false).
	sharedSuffix = "-SHARED"

	ResourceGPU      = allocator.ResourceGPU
	ResourceShare    = allocator.ResourceShare
	ResourceGPUShare = allocator.ResourceGPUShare
	// ResourceGPUReplica is nvidia.com/gpu renamed by a time-slicing device
	// plugin with renameByDefault: one replica of a GPU.
	ResourceGPUReplica = "nvidia.com/gpu.shared"
	resourceMIGPrefix  = "nvidia.com/mig-"

	// DefaultShareUnitMiB is the size of one unit of a memory-share resource.
	DefaultShareUnitMiB = allocator.DefaultShareUnitMiB
)

// Profile is a MIG profile a pool serves, with the resource that asks for it.
type Profile struct {
	allocator.Profile
	// Resource is the extended resource a container requests for one slice.
	Resource string `json:"resource"`
}

// Node is one node of a pool, reduced to what fitting needs.
type Node struct {
	Name string `json:"name"`
	// Allocatable holds the node's GPU resources (only those), as integers.
	Allocatable map[string]int64 `json:"allocatable"`
	// Compute is the node's allocatable CPU (ResourceCPU, in millicores)
	// and memory (ResourceMemory, in bytes), as the inventory was built: a
	// Live does not rebuild on a change of these alone (the kubelet changes
	// them only when restarted with other reservations). Nil where the node
	// states neither; then a pod's CPU and memory are not checked there.
	Compute map[string]int64 `json:"-"`
	// Labels are the node's labels when the inventory was built. A pod's
	// own nodeSelector and required node affinity are matched against
	// Object, whose labels a Live keeps current between rebuilds.
	Labels map[string]string `json:"-"`
	// Down are the taints that keep new pods off the node while it is
	// cordoned (spec.unschedulable, as the scheduler reads it:
	// node.kubernetes.io/unschedulable), unreachable or not ready; nil while
	// it takes pods. A pod that tolerates them may still go there.
	Down []corev1.Taint `json:"-"`

	ref *nodeRef // Object, made once with the inventory (or kept by a Live)
}

// Object is the node as a scheduler's node-affinity matcher reads it:
// its name (matchFields metadata.name) and its labels. An inventory's nodes
// make it once, not on every decision that matches a pod against them; a
// Live's inventory shares it with the Live, which swaps in a node's new
// labels without a rebuild. Callers must not change it.
func (n Node) Object() *corev1.Node {
	if n.ref != nil {
		return n.ref.obj.Load()
	}
	return newNodeObject(n.Name, n.Labels)
}

func newNodeObject(name string, labels map[string]string) *corev1.Node {
	o := &corev1.Node{}
	o.Name, o.Labels = name, labels
	return o
}

// Pool is a set of GPU nodes with the same model and mode.
type Pool struct {
	// Name is the gpuadmit.io/pool label, or "<model>-<mode>" derived from the nodes.
	Name string `json:"name"`
	// Model is the catalog model name, or the product label when the catalog does not know it.
	Model string `json:"model"`
	// Product is the nodes' nvidia.com/gpu.product label.
	Product string `json:"product"`
	// Mode is how the pool serves GPU.
	Mode Mode `json:"mode"`
	// DRA is true where gpuadmit's DRA driver serves the nodes' GPUs: the
	// scheduler fits each claim on one device, and whole GPUs and MIG slices
	// keep their nvidia.com names through DeviceClass extendedResourceName.
	DRA bool `json:"dra,omitempty"`
	// GPUMemoryMiB is one GPU's total memory.
	GPUMemoryMiB int64 `json:"gpuMemoryMiB"`
	// MemorySlices is the GPU's MIG memory slice count (0 when not a MIG model).
	MemorySlices int `json:"memorySlices"`
	// Resource is what a container requests: nvidia.com/gpu (whole,
	// mig-single, time-sliced), nvidia.com/gpu.shared (time-sliced,
	// renamed) or the share resource.
	Resource string `json:"resource,omitempty"`
	// ShareUnitMiB is the MiB in one unit of a shared pool's resource; on a
	// DRA GPU pool, the step a share claim's memory is rounded up to (0
	// when its GPUs cannot be shared).
	ShareUnitMiB int64 `json:"shareUnitMiB,omitempty"`
	// SharesPerGPU is set where gpuadmit's agent serves the pool's shares
	// (its allocator.ShareOffer): each GPU is cut into this many devices of
	// ShareUnitMiB and a container takes exactly one, so the stock
	// scheduler's node-wide count is a per-GPU count. Zero for share
	// resources served otherwise (gpushare), whose units a container may
	// take several of.
	SharesPerGPU int64 `json:"sharesPerGPU,omitempty"`
	// ReplicasPerGPU is how many replicas a time-sliced pool's device
	// plugin makes of each GPU; 0 for other modes.
	ReplicasPerGPU int64 `json:"replicasPerGPU,omitempty"`
	// Profiles are the MIG profiles the pool serves, smallest first.
	Profiles []Profile `json:"profiles,omitempty"`
	// NodeSelector pins a pod to the pool.
	NodeSelector map[string]string `json:"nodeSelector"`
	// Taints are the NoSchedule and NoExecute taints of the pool's nodes.
	Taints []corev1.Taint `json:"taints"`
	// GPUsPerNode is the largest GPU count of a node in the pool.
	GPUsPerNode int64 `json:"gpusPerNode"`
	// Allocatable sums the pool's allocatable GPU resources.
	Allocatable map[string]int64 `json:"allocatable"`
	// Nodes are the pool's nodes, sorted by name.
	Nodes []Node `json:"-"`
	// NodeCount is len(Nodes), for policies.
	NodeCount int `json:"nodeCount"`
	// AccountedNodes counts the nodes that advertise the accounting
	// resources; only those take GPU pods, which always request them.
	AccountedNodes int `json:"accountedNodes"`
	// ModelResource is the pool's per-model accounting resource.
	ModelResource string `json:"modelResource"`
	// ExcludeNamed is true for a pool derived from product labels whose
	// selector also matches nodes an operator put in a named pool: a pod
	// placed on it must also say it wants no node with gpuadmit.io/pool.
	ExcludeNamed bool `json:"excludeNamed"`

	common map[string]string    // selector labels all nodes share
	offer  allocator.ShareOffer // the nodes' share offer, which all must share
}

// node is the pool's node of that name (Nodes are sorted by name).
func (p *Pool) node(name string) (Node, bool) {
	i, ok := slices.BinarySearchFunc(p.Nodes, name, func(n Node, name string) int { return strings.Compare(n.Name, name) })
	if !ok {
		return Node{}, false
	}
	return p.Nodes[i], true
}

// Profile returns the MIG profile the pool serves under that name ("1g.10gb+me" or "1g.10gb.me").
func (p *Pool) Profile(name string) (Profile, bool) {
	name = allocator.NormalizeProfile(name)
	for _, pr := range p.Profiles {
		if pr.Name == name {
			return pr, true
		}
	}
	return Profile{}, false
}

// AllocatorProfiles returns the pool's profiles as the allocator's type, for fitting.
func (p *Pool) AllocatorProfiles() []allocator.Profile {
	out := make([]allocator.Profile, len(p.Profiles))
	for i, pr := range p.Profiles {
		out[i] = pr.Profile
	}
	return out
}

// ServesShares reports whether the pool gives memory shares: a shared pool,
// or a DRA GPU pool whose GPUs claims may share.
func (p *Pool) ServesShares() bool {
	return p.Mode == Shared || p.DRA && p.Mode == Whole && p.ShareUnitMiB > 0
}

// UnitsPerGPU is how many share units one GPU of a shared pool holds.
func (p *Pool) UnitsPerGPU() int64 {
	if p.SharesPerGPU > 0 {
		return p.SharesPerGPU
	}
	if p.ShareUnitMiB <= 0 {
		return 0
	}
	return p.GPUMemoryMiB / p.ShareUnitMiB
}

// Fits reports whether one node of the pool has at least demand of every resource.
func (p *Pool) Fits(demand map[string]int64) bool {
	return FitsOn(p.Nodes, demand)
}

// ResourceCPU and ResourceMemory key Node.Compute and the CPU and memory
// in Held.ByNode.
const (
	ResourceCPU    = string(corev1.ResourceCPU)
	ResourceMemory = string(corev1.ResourceMemory)
)

// computeOf is n's allocatable CPU (millicores) and memory (bytes), or nil
// where it states neither.
func computeOf(n *corev1.Node) map[string]int64 {
	var out map[string]int64
	if q, ok := n.Status.Allocatable[corev1.ResourceCPU]; ok {
		out = map[string]int64{ResourceCPU: q.MilliValue()}
	}
	if q, ok := n.Status.Allocatable[corev1.ResourceMemory]; ok {
		if out == nil {
			out = map[string]int64{}
		}
		out[ResourceMemory] = q.Value()
	}
	return out
}

// FitsOn reports whether one of nodes has at least demand of every resource.
func FitsOn(nodes []Node, demand map[string]int64) bool {
	for _, n := range nodes {
		if nodeFits(n, demand) {
			return true
		}
	}
	return false
}

func nodeFits(n Node, demand map[string]int64) bool {
	for r, q := range demand {
		if n.Allocatable[r] < q {
			return false
		}
	}
	return true
}

// MIGResource is the mixed-strategy resource name of a MIG profile: "+" is written ".".
func MIGResource(profile string) string {
	return resourceMIGPrefix + strings.ReplaceAll(allocator.NormalizeProfile(profile), "+", ".")
}

// IsMIGResource reports whether name is a nvidia.com/mig-<profile> resource.
func IsMIGResource(name string) bool {
	return strings.HasPrefix(name, resourceMIGPrefix)
}

// IsGPUResource reports whether a node resource is one the inventory counts.
func IsGPUResource(name string) bool {
	return name == ResourceGPU || name == ResourceGPUReplica || name == ResourceShare || name == ResourceGPUShare || IsMIGResource(name) || IsAccountingResource(name)
}
