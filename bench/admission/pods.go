package admission

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// shape is one kind of benchmark pod: how it asks for GPU, in which dialect.
type shape struct {
	class   string            // gpuadmit.io/class label
	backend string            // gpuadmit.io/backend annotation, "" for none
	gpu     map[string]string // GPU limits
}

// shapes is the pod mix, the same for every configuration, pod i taking
// shapes[i%len(shapes)]: gpuadmit's own memory form (to MIG slices and, with
// the backend hint, a memory share), whole GPUs the NVIDIA way (on L40S, and
// on A100 80GB where 8 do not fit an L40S node) and HAMi's memory in MiB.
var shapes = []shape{
	{class: "inference", gpu: map[string]string{"gpuadmit.io/gpu-memory": "4Gi"}},
	{class: "training", gpu: map[string]string{"nvidia.com/gpu": "1"}},
	{class: "inference", gpu: map[string]string{"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}},
	{class: "training", gpu: map[string]string{"gpuadmit.io/gpu-memory": "20Gi"}},
	{class: "batch", gpu: map[string]string{"nvidia.com/gpu": "2"}},
	{class: "batch", gpu: map[string]string{"nvidia.com/gpu": "1", "nvidia.com/gpumem": "10000"}},
	{class: "batch", backend: "shared", gpu: map[string]string{"gpuadmit.io/gpu-memory": "6Gi"}},
	{class: "training", gpu: map[string]string{"nvidia.com/gpu": "8"}},
	{class: "inference", gpu: map[string]string{"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20000"}},
	{class: "inference", gpu: map[string]string{"gpuadmit.io/gpu-memory": "40Gi"}},
	{class: "training", gpu: map[string]string{"nvidia.com/gpu": "4"}},
	{class: "training", gpu: map[string]string{"gpuadmit.io/gpu-memory": "16Gi"}},
}

// Pod is benchmark pod i: one container with CPU, memory and GPU limits
// (requests are defaulted from them) and the class label, as a training or
// serving job's pod template would have it.
func Pod(namespace, name string, i int) *corev1.Pod {
	s := shapes[i%len(shapes)]
	p := &corev1.Pod{}
	p.Namespace, p.Name = namespace, name
	p.Labels = map[string]string{"app": "bench", "gpuadmit.io/class": s.class}
	if s.backend != "" {
		p.Annotations = map[string]string{"gpuadmit.io/backend": s.backend}
	}
	limits := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("500m"),
		corev1.ResourceMemory: resource.MustParse("1Gi"),
	}
	for r, q := range s.gpu {
		limits[corev1.ResourceName(r)] = resource.MustParse(q)
	}
	p.Spec.Containers = []corev1.Container{{
		Name:      "main",
		Image:     "registry.k8s.io/pause:3.10",
		Resources: corev1.ResourceRequirements{Limits: limits},
	}}
	p.Spec.TerminationGracePeriodSeconds = new(int64)
	return p
}

// Mix is how a run's pods differ from one another, the value of Options.Mix.
type Mix string

// The pod mixes. Pods of one template are what controllers create (a
// Deployment's, a Job's, a StatefulSet's pods), and what gpuadmit's
// decision memo serves after the first; pods that all differ in what the
// policy reads are its worst case, every one decided afresh.
const (
	// MixShapes is the default: pod i takes shapes[i%len(shapes)], twelve
	// templates in turn.
	MixShapes Mix = "shapes"
	// MixTemplate gives every pod the first shape, as one template.
	MixTemplate Mix = "template"
	// MixDistinct is MixShapes with the GPU container named after the pod,
	// so no two pods look alike to the policy: every policy reads the
	// containers it decides for (input.containers), by name. (A toleration
	// of its own, this mix's difference before, is in no field the default
	// policies read.)
	MixDistinct Mix = "distinct"
	// MixLabeled is MixTemplate with a label that holds the pod's name
	// (DistinctKey), as frameworks that label each pod they create (an
	// executor's or a task's index) do: the default policies read no
	// labels, so the pods are alike to them (policy.PodReads).
	MixLabeled Mix = "labeled"
)

// Mixes are all of them.
var Mixes = []Mix{MixShapes, MixTemplate, MixDistinct, MixLabeled}

// DistinctKey is the label (MixLabeled) whose value is each pod's name.
// Pod names are unique within a run, warm-up pods' included, and are
// valid container names (MixDistinct).
const DistinctKey = "bench.gpuadmit.io/pod"

// Pod is benchmark pod i of the mix, named name.
func (m Mix) Pod(namespace, name string, i int) *corev1.Pod {
	switch m {
	case MixTemplate:
		return Pod(namespace, name, 0)
	case MixDistinct:
		p := Pod(namespace, name, i)
		p.Spec.Containers[0].Name = name
		return p
	case MixLabeled:
		p := Pod(namespace, name, 0)
		p.Labels[DistinctKey] = name
		return p
	}
	return Pod(namespace, name, i)
}

// shapeCount is how many pod shapes the mix uses.
func (m Mix) shapeCount() int {
	if m == MixTemplate || m == MixLabeled {
		return 1
	}
	return len(shapes)
}

// String names the shape: its GPU limits and hints.
func (s shape) String() string {
	parts := make([]string, 0, len(s.gpu)+2)
	for _, k := range slices.Sorted(maps.Keys(s.gpu)) {
		parts = append(parts, k+"="+s.gpu[k])
	}
	parts = append(parts, "class="+s.class)
	if s.backend != "" {
		parts = append(parts, "backend="+s.backend)
	}
	return strings.Join(parts, " ")
}
