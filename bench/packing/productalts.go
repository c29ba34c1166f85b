package packing

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuadmit/gpuadmit/pkg/agent/dra"
	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/claim"
	"github.com/gpuadmit/gpuadmit/pkg/intent"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
	"github.com/gpuadmit/gpuadmit/pkg/quota"
)

// TraceGPUMemoryMiB is the GPU memory the product's path gives each of the
// trace's GPU models. The trace has no memory column, and the default
// policies order pools by it (least memory that holds the request first).
// The named models take the catalog's totals (pkg/allocator/models.go: T4,
// A10, P100-16GB, V100-16GB, V100-32GB). G2 and G3 are anonymised in the
// trace; they are taken as the largest (an 80 GB GPU), which puts them last
// in the policy's order, after V100M32, G2 before G3 by pool name. P100 and
// V100M16 have the same memory and keep the same order by name.
var TraceGPUMemoryMiB = map[string]int64{
	"T4": 15360, "P100": 16384, "V100M16": 16384, "A10": 23028, "V100M32": 32768,
	"G2": 81920, "G3": 81920,
}

// derivationTimeout bounds one policy evaluation of ProductDeriver.
const derivationTimeout = time.Minute

// Alt is one alternative of a pod on the product's path: a form (a share
// of one GPU, or whole GPUs) on one GPU model. Milli and GPUs are what it
// takes of a node, as a Pod's GPUMilli and GPUs.
type Alt struct {
	Model string
	Milli int64
	GPUs  int
}

// ProductDeriver gives each trace pod the alternatives gpuadmit's webhook
// gives it with the embedded default policies, on a cluster with one DRA
// pool per GPU model of the trace (TraceGPUMemoryMiB). The pod is written as
// a user writes it: its GPU as a native request (gpuadmit.io/gpu: 460m,
// or 2 for two GPUs) and its gpu_spec, where it names models, as HAMi's
// nvidia.com/use-gputype list (gpuadmit.io/model takes one model only).
// Pods that ask alike share one decision.
type ProductDeriver struct {
	mutator *mutate.Mutator
	models  map[string]string // pool name → trace model
	memo    map[podKind][]Alt
}

// podKind is what the webhook's decision reads of a trace pod.
type podKind struct {
	gpus  int
	milli int64
	spec  string
}

// NewProductDeriver loads the embedded default policies, as the webhook
// does, and builds the inventory of one DRA node per GPU model of nodes.
func NewProductDeriver(ctx context.Context, nodes []Node) (*ProductDeriver, error) {
	return newProductDeriver(ctx, nodes, TraceGPUMemoryMiB)
}

// newProductDeriver is NewProductDeriver with each model's GPU memory from
// mib.
func newProductDeriver(ctx context.Context, nodes []Node, mib map[string]int64) (*ProductDeriver, error) {
	// The webhook's budget for one evaluation (250 ms) is a latency bound;
	// a benchmark sharing a loaded machine would be refused decisions it
	// takes longer than that to make, and decisions do not depend on time.
	engine := policy.NewEngine(policy.Options{Validate: quota.ValidSet, EvalTimeout: derivationTimeout})
	if _, err := engine.Load(ctx, policy.Embedded()); err != nil {
		return nil, fmt.Errorf("load the default policies: %w", err)
	}
	var kubeNodes []corev1.Node
	var sl []resourceapi.ResourceSlice
	most := map[string]int{} // GPUs of the largest node of each model
	for _, n := range nodes {
		if n.GPUs > 0 {
			most[n.Model] = max(most[n.Model], n.GPUs)
		}
	}
	models := slices.Sorted(maps.Keys(most))
	for _, m := range models {
		memory, ok := mib[m]
		if !ok {
			return nil, fmt.Errorf("GPU model %q of the cluster has no memory in TraceGPUMemoryMiB", m)
		}
		n, s := draNode(m, memory, most[m])
		kubeNodes, sl = append(kubeNodes, n), append(sl, s)
	}
	inv := inventory.BuildWithSlices(kubeNodes, sl, allocator.Default())
	d := &ProductDeriver{
		mutator: mutate.NewMutator(engine, mutate.StaticInventory{Inv: inv}, mutate.MutatorOptions{}),
		models:  map[string]string{}, memo: map[podKind][]Alt{},
	}
	pooled := map[string]bool{}
	for _, p := range inv.Pools {
		for _, n := range p.Nodes {
			m := strings.TrimPrefix(n.Name, "trace-")
			d.models[p.Name], pooled[m] = m, true
		}
	}
	for _, m := range models {
		if !pooled[m] {
			return nil, fmt.Errorf("the inventory made no pool of the DRA node of GPU model %q (warnings: %s)", m, strings.Join(inv.Warnings, "; "))
		}
	}
	return d, nil
}

// draNode is one node of model, named trace-<model>, whose gpus GPUs of
// mib gpuadmit's DRA driver publishes shareable in steps of 1 MiB, as the
// replay's nodes are (bench/replay). The webhook reads sizes only (how
// many GPUs a node of the pool has, how much memory each), never free
// capacity on DRA pools, so one node of the model's largest size stands
// for the model's pool.
func draNode(model string, mib int64, gpus int) (corev1.Node, resourceapi.ResourceSlice) {
	name := "trace-" + model
	alloc := corev1.ResourceList{
		corev1.ResourceCPU:                                  resource.MustParse("128"),
		corev1.ResourceMemory:                               resource.MustParse("1Ti"),
		corev1.ResourceName(inventory.ResourceMemoryMiB):    *resource.NewQuantity(allocator.QuotaOnlyMiB, resource.DecimalSI),
		corev1.ResourceName(inventory.ModelResource(model)): *resource.NewQuantity(int64(gpus)*mib, resource.DecimalSI),
	}
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			inventory.LabelProduct: model, inventory.LabelCount: strconv.Itoa(gpus), inventory.LabelMemory: strconv.FormatInt(mib, 10),
			allocator.LabelNodeMode: allocator.NodeModeDRA,
		}},
		Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc},
	}
	devs := make([]allocator.NodeGPU, gpus)
	for i := range devs {
		devs[i] = allocator.NodeGPU{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", name, i), Product: model, Model: model,
			MemoryMiB: mib, MIGMode: allocator.MIGUnsupported, Healthy: true}
	}
	s := resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-gpu"}}
	s.Spec.Driver, s.Spec.NodeName = dra.DriverName, &name
	s.Spec.Pool = resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1}
	s.Spec.Devices = dra.Devices(devs, dra.DeviceOptions{ShareUnitMiB: 1})
	return n, s
}

// Alternatives are p's alternatives in the webhook's order: a claim's
// firstAvailable subrequests where the policy accepts several pools, the
// one pool's form where it accepts one. A pod without GPU has none; a
// denied pod is an error that says why.
func (d *ProductDeriver) Alternatives(ctx context.Context, p Pod) ([]Alt, error) {
	if p.GPUs == 0 {
		return nil, nil
	}
	k := podKind{gpus: p.GPUs, milli: p.GPUMilli, spec: p.Spec}
	if alts, ok := d.memo[k]; ok {
		return alts, nil
	}
	alts, err := d.derive(ctx, p)
	if err != nil {
		return nil, err
	}
	d.memo[k] = alts
	return alts, nil
}

func (d *ProductDeriver) derive(ctx context.Context, p Pod) ([]Alt, error) {
	res, err := d.mutator.Mutate(ctx, mutate.Request{Pod: userPod(p)})
	if err != nil {
		return nil, fmt.Errorf("decide for a pod of %d×%dm GPU, spec %q: %w", p.GPUs, p.GPUMilli, p.Spec, err)
	}
	if !res.Allowed {
		return nil, fmt.Errorf("a pod of %d×%dm GPU, spec %q, is denied: %s", p.GPUs, p.GPUMilli, p.Spec, res.Message)
	}
	if ann, ok := res.Pod.Annotations[claim.AnnotationAlternatives]; ok {
		return d.fromClaim(p, ann)
	}
	pool := mutate.PoolOf(res.Pod)
	model, ok := d.models[pool]
	if !ok {
		return nil, fmt.Errorf("a pod of %d×%dm GPU, spec %q, was placed on pool %q, which is none of the trace's", p.GPUs, p.GPUMilli, p.Spec, pool)
	}
	return []Alt{{Model: model, Milli: p.GPUMilli, GPUs: p.GPUs}}, nil
}

// fromClaim reads the alternatives of the pod's one claim template. A share
// is p's share on any model (the simulator counts a GPU in milli-GPU), and
// whole GPUs are whole.
func (d *ProductDeriver) fromClaim(p Pod, ann string) ([]Alt, error) {
	var templates map[string][]claim.Alternative
	if err := json.Unmarshal([]byte(ann), &templates); err != nil || len(templates) != 1 {
		return nil, fmt.Errorf("a pod of spec %q: annotation %s %q is not one template's alternatives", p.Spec, claim.AnnotationAlternatives, ann)
	}
	var out []Alt
	for _, alts := range templates {
		for _, a := range alts {
			model := a.Model
			switch a.Backend {
			case claim.BackendShared:
				out = append(out, Alt{Model: model, Milli: p.GPUMilli, GPUs: 1})
			case claim.BackendWhole:
				out = append(out, Alt{Model: model, Milli: milliPerGPU, GPUs: int(max(a.Count, 1))})
			default:
				return nil, fmt.Errorf("a pod of spec %q got a %s alternative, which the trace's GPUs do not have", p.Spec, a.Backend)
			}
		}
	}
	return out, nil
}

// userPod is p as a user writes it for gpuadmit: its GPU as the native
// request and the models gpu_spec names as HAMi's GPU type list.
func userPod(p Pod) *corev1.Pod {
	q := *resource.NewQuantity(int64(p.GPUs), resource.DecimalSI)
	if p.Shared() {
		q = *resource.NewMilliQuantity(p.GPUMilli, resource.DecimalSI)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "trace-pod", Namespace: "trace"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{intent.ResourceNativeGPU: q}}}}},
	}
	if p.Spec != "" {
		pod.Annotations = map[string]string{intent.AnnotationHAMiUseType: strings.ReplaceAll(p.Spec, "|", ",")}
	}
	return pod
}
