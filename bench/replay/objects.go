package replay

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuadmit/gpuadmit/bench/packing"
	"github.com/gpuadmit/gpuadmit/pkg/agent/dra"
	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate"
)

// Namespace holds the replayed pods and their claims.
const Namespace = "replay"

// gpuMemoryMiB is a fake GPU's memory: one MiB per milli-GPU of the trace.
const gpuMemoryMiB = allocator.MilliPerGPU

// podsPerNode is every node's pod capacity: the simulator has no limit.
const podsPerNode = "10000"

// modelLabel carries the trace's GPU model on a node, for the reader.
const modelLabel = "gpuadmit.io/trace-model"

// Node is the trace node n as a Node: its CPU, memory and, as the GPU
// resource, the accounting capacity of its GPUs (1000 per GPU); on a GPU
// node, the labels GPU Feature Discovery would set (product, count and
// memory of the replay's GPUs), by which gpuadmit's inventory puts the
// node in a pool of its model.
func Node(n packing.Node) *corev1.Node {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{
		corev1.LabelHostname: n.Name, modelLabel: n.Model,
	}}}
	if n.GPUs > 0 {
		node.Labels[inventory.LabelProduct] = n.Model
		node.Labels[inventory.LabelCount] = strconv.Itoa(n.GPUs)
		node.Labels[inventory.LabelMemory] = strconv.Itoa(gpuMemoryMiB)
	}
	node.Status.Allocatable = corev1.ResourceList{
		corev1.ResourceCPU:          *resource.NewMilliQuantity(n.MilliCPU, resource.DecimalSI),
		corev1.ResourceMemory:       *resource.NewQuantity(n.MemoryMiB<<20, resource.BinarySI),
		corev1.ResourcePods:         resource.MustParse(podsPerNode),
		allocator.ResourceMemoryMiB: *resource.NewQuantity(int64(n.GPUs)*gpuMemoryMiB, resource.DecimalSI),
	}
	node.Status.Capacity = node.Status.Allocatable.DeepCopy()
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
	return node
}

// Slice is the ResourceSlice the DRA agent would publish for n's GPUs, each
// of gpuMemoryMiB shared in steps of 1 MiB; nil for a node without GPU.
func Slice(n packing.Node) *resourceapi.ResourceSlice {
	if n.GPUs == 0 {
		return nil
	}
	gpus := make([]allocator.NodeGPU, n.GPUs)
	for i := range gpus {
		gpus[i] = allocator.NodeGPU{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", n.Name, i), Product: n.Model,
			Model: n.Model, MemoryMiB: gpuMemoryMiB, MIGMode: allocator.MIGUnsupported, Healthy: true}
	}
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: n.Name + "-gpu"}}
	s.Spec.Driver, s.Spec.NodeName = dra.DriverName, &n.Name
	s.Spec.Pool = resourceapi.ResourcePool{Name: n.Name, Generation: 1, ResourceSliceCount: 1}
	s.Spec.Devices = dra.Devices(gpus, dra.DeviceOptions{ShareUnitMiB: 1})
	return s
}

// PodName is the name of the i-th pod of the workload (0-based): its place,
// so names sort in arrival order, and its name in the trace.
func PodName(i int, p packing.Pod) string {
	return fmt.Sprintf("p%05d-%s", i, strings.ToLower(p.Name))
}

// podIndex reads the place back from a PodName; -1 when it is not one.
func podIndex(name string) int {
	if len(name) < 6 || name[0] != 'p' {
		return -1
	}
	i, err := strconv.Atoi(name[1:6])
	if err != nil {
		return -1
	}
	return i
}

// claimRequest is the name of a claim's one request.
const claimRequest = "gpu"

// Claim is the ResourceClaim of the pod called name with trace pod p's GPU:
// a share of one GPU in MiB (milli-GPU), or p.GPUs whole GPUs; nil for a
// pod without GPU.
func Claim(name string, p packing.Pod) *resourceapi.ResourceClaim {
	if p.GPUs == 0 {
		return nil
	}
	req := &resourceapi.ExactDeviceRequest{DeviceClassName: allocator.DRAClassGPU, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: int64(p.GPUs)}
	if p.Shared() {
		req.DeviceClassName = allocator.DRAClassShare
		req.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
			allocator.DRACapacityMemory: *resource.NewQuantity(p.GPUMilli<<20, resource.BinarySI),
		}}
	}
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name}}
	c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: claimRequest, Exactly: req}}
	return c
}

// Pod is the pod called name for trace pod p, scheduled by scheduler: its
// CPU and memory, its claim (named as the pod) and the accounting resource
// of its GPU; for a GPU pod, gpuadmit's label gpuadmit.io/managed, as the
// webhook sets it (the usage trace reads gpuadmit's pods by it), and where
// the trace names GPU models (gpu_spec), a node affinity to them.
func Pod(name, scheduler string, p packing.Pod) *corev1.Pod {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(p.MilliCPU, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(p.MemoryMiB<<20, resource.BinarySI),
	}
	c := corev1.Container{Name: "main", Image: "registry.k8s.io/pause:3.10"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name}}
	if p.GPUs > 0 {
		acct := corev1.ResourceList{allocator.ResourceMemoryMiB: *resource.NewQuantity(p.GPUMilliTotal(), resource.DecimalSI)}
		c.Resources.Limits = acct
		res[allocator.ResourceMemoryMiB] = acct[allocator.ResourceMemoryMiB]
		c.Resources.Claims = []corev1.ResourceClaim{{Name: claimRequest}}
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: claimRequest, ResourceClaimName: &name}}
		pod.Labels = map[string]string{mutate.LabelManaged: "true"}
		pod.Spec.Affinity = modelAffinity(p.Spec)
	}
	c.Resources.Requests = res
	pod.Spec.Containers = []corev1.Container{c}
	pod.Spec.SchedulerName = scheduler
	pod.Spec.TerminationGracePeriodSeconds = new(int64)
	return pod
}

// modelAffinity requires a node of one of the models spec names
// ("V100M16|V100M32", as packing.Pod.Spec holds gpu_spec); nil for none.
func modelAffinity(spec string) *corev1.Affinity {
	if spec == "" {
		return nil
	}
	req := corev1.NodeSelectorRequirement{Key: modelLabel, Operator: corev1.NodeSelectorOpIn, Values: strings.Split(spec, "|")}
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req}}},
	}}}
}
