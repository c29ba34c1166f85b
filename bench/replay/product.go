package replay

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuadmit/gpuadmit/bench/packing"
	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/intent"
)

// The product's path: pods written as a user writes them, decided by
// gpuadmit's own webhook (default embedded policies, its controller's
// claim-template reconciler), then scheduled.
const (
	// ProductGPUAdmit is the webhook with DRA alternatives, and
	// gpuadmit-scheduler (deploy/scheduler's profile, leader election on,
	// so that gpuadmit's controller gives it the pools and the webhook
	// names it in the GPU pods).
	ProductGPUAdmit = "webhook-gpuadmit"
	// ProductStock is the webhook with DRA alternatives and the stock
	// kube-scheduler's default profile.
	ProductStock = "webhook-default"
	// ProductOnePool is the webhook placing every pod on one pool
	// (--no-dra-alternatives: what it did before alternatives), the first
	// with room in the policy's order (--pool-pick=order: what it did
	// before the pick by expected demand), and the stock kube-scheduler's
	// default profile.
	ProductOnePool = "webhook-onepool"
	// ProductPick is the webhook placing every pod on one pool, picked by
	// the expected demand of the pods only some models can serve
	// (--no-dra-alternatives --pool-pick=expected: the webhook's pick on
	// device-plugin pools), and the stock kube-scheduler's default profile.
	ProductPick = "webhook-pick"
)

// ProductConfigurations are the product-path configurations, in the order
// a replay runs them.
var ProductConfigurations = []string{ProductGPUAdmit, ProductStock, ProductOnePool, ProductPick}

// AllConfigurations are every configuration a replay can run.
var AllConfigurations = slices.Concat(Configurations, ProductConfigurations)

// resourceGPU is the native request: gpuadmit.io/gpu, fractions allowed.
const resourceGPU = "gpuadmit.io/gpu"

// ProductNode is Node as gpuadmit's DRA agent leaves it: the GFD labels,
// the node mode label, and the DRA agent's accounting capacity
// (agent.DRAAccounting): gpuadmit.io/gpu-memory-mib at the quota-only
// allocator.QuotaOnlyMiB, and the model's resource at the GPUs' memory.
func ProductNode(n packing.Node) *corev1.Node {
	node := Node(n)
	if n.GPUs == 0 {
		delete(node.Status.Allocatable, allocator.ResourceMemoryMiB)
		node.Status.Capacity = node.Status.Allocatable.DeepCopy()
		return node
	}
	node.Labels[allocator.LabelNodeMode] = allocator.NodeModeDRA
	node.Status.Allocatable[allocator.ResourceMemoryMiB] = *resource.NewQuantity(allocator.QuotaOnlyMiB, resource.DecimalSI)
	node.Status.Allocatable[corev1.ResourceName(allocator.AccountingResource(n.Model))] =
		*resource.NewQuantity(int64(n.GPUs)*gpuMemoryMiB, resource.DecimalSI)
	node.Status.Capacity = node.Status.Allocatable.DeepCopy()
	return node
}

// ProductPod is trace pod p as a user writes it for gpuadmit: its CPU and
// memory; for a GPU pod, the native request gpuadmit.io/gpu in limits (a
// share as milli-GPU, "300m"; whole GPUs as a count, "2") and the trace's
// gpu_spec as a model hint (modelHint); no claim, no accounting resource,
// no scheduler: the webhook writes those. A pod without GPU never reaches
// the webhook and names scheduler itself.
func ProductPod(name, scheduler string, p packing.Pod) *corev1.Pod {
	c := corev1.Container{Name: "main", Image: "registry.k8s.io/pause:3.10"}
	c.Resources.Requests = corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(p.MilliCPU, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(p.MemoryMiB<<20, resource.BinarySI),
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name}}
	pod.Spec.TerminationGracePeriodSeconds = new(int64)
	if p.GPUs == 0 {
		pod.Spec.SchedulerName = scheduler
		pod.Spec.Containers = []corev1.Container{c}
		return pod
	}
	q := *resource.NewQuantity(int64(p.GPUs), resource.DecimalSI)
	if p.Shared() {
		q = *resource.NewMilliQuantity(p.GPUMilli, resource.DecimalSI)
	}
	c.Resources.Limits = corev1.ResourceList{resourceGPU: q}
	pod.Spec.Containers = []corev1.Container{c}
	if k, v := modelHint(p.Spec); k != "" {
		pod.Annotations = map[string]string{k: v}
	}
	return pod
}

// modelHint is how a user tells gpuadmit the GPU models a pod accepts, for
// the trace's gpu_spec ("V100M16|V100M32"): one model is gpuadmit's own
// hint gpuadmit.io/model, which names a single model; several are HAMi's
// nvidia.com/use-gputype list, which gpuadmit reads as a hint too (a pool
// is allowed when a listed type is part of its model or product name; no
// trace model's name is part of another's, TestTraceModelsMatchOnlyThemselves).
// Empty key for a pod that accepts any model.
func modelHint(spec string) (key, value string) {
	var models []string
	for _, m := range strings.Split(spec, "|") {
		if m != "" && !slices.Contains(models, m) {
			models = append(models, m)
		}
	}
	switch len(models) {
	case 0:
		return "", ""
	case 1:
		return intent.AnnotationModel, models[0]
	}
	return intent.AnnotationHAMiUseType, strings.Join(models, ",")
}

// probePod is a pod of one whole GPU of model (any model where empty), for
// a dry run that shows whether the webhook's inventory has the pools yet.
func probePod(model string) *corev1.Pod {
	p := ProductPod("probe-"+strings.ToLower(model), "", packing.Pod{GPUs: 1, GPUMilli: allocator.MilliPerGPU, Spec: model, MilliCPU: 1, MemoryMiB: 1})
	if model == "" {
		p.Name = "probe"
	}
	return p
}

// models are the GPU models of nodes, sorted.
func models(nodes []packing.Node) []string {
	var out []string
	for _, n := range nodes {
		if n.GPUs > 0 && !slices.Contains(out, n.Model) {
			out = append(out, n.Model)
		}
	}
	slices.Sort(out)
	return out
}
