package inventory

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// What of a Node Build reads. Only a change of these rebuilds the pools:
// GPU Feature Discovery rewrites nvidia.com/gfd.timestamp on every GPU
// node once a minute, the kubelet its heartbeats and conditions, and none
// of them changes a pool. TestBuildReadsOnlyTheListedLabels keeps this list
// and the readers (build.go, assemble.go, share.go, annotation.go) in step.
var (
	// builtFromLabels are the node labels Build reads.
	builtFromLabels = []string{LabelPool, LabelProduct, LabelMemory, LabelCount, LabelMIGStrategy, LabelReplicas, allocator.LabelNodeMode}
	// builtFromAnnotations are the node annotations Build reads: the agent's.
	builtFromAnnotations = []string{allocator.AnnotationGPUs, allocator.AnnotationShare}
)

// migMemorySuffix ends GFD's nvidia.com/mig-<profile>.memory labels, which
// Build reads for a profile's memory (profileMemoryLabel).
const migMemorySuffix = ".memory"

// builtFromLabel reports whether Build reads the node label key.
func builtFromLabel(key string) bool {
	return slices.Contains(builtFromLabels, key) ||
		strings.HasPrefix(key, resourceMIGPrefix) && strings.HasSuffix(key, migMemorySuffix)
}

// relevantChange reports whether n differs from o in what Build reads: the
// listed labels and annotations, the taints, spec.unschedulable and the GPU
// resources of allocatable. Other labels matter only to matching a pod's
// node affinity, which reads them live (nodeRefs), without a rebuild.
func relevantChange(o, n *corev1.Node) bool {
	return !maps.Equal(builtLabels(o), builtLabels(n)) ||
		!maps.Equal(builtAnnotations(o), builtAnnotations(n)) ||
		!equality.Semantic.DeepEqual(o.Spec.Taints, n.Spec.Taints) || o.Spec.Unschedulable != n.Spec.Unschedulable ||
		!equality.Semantic.DeepEqual(builtAllocatable(o), builtAllocatable(n))
}

func builtLabels(n *corev1.Node) map[string]string {
	out := map[string]string{}
	for k, v := range n.Labels {
		if builtFromLabel(k) {
			out[k] = v
		}
	}
	return out
}

func builtAnnotations(n *corev1.Node) map[string]string {
	out := map[string]string{}
	for _, k := range builtFromAnnotations {
		if v, ok := n.Annotations[k]; ok {
			out[k] = v
		}
	}
	return out
}

// builtAllocatable is what gpuAllocatable can read of n's allocatable: the
// GPU resources and the share resource its agent's offer names (read
// without judging the offer: a malformed one is a change too).
func builtAllocatable(n *corev1.Node) corev1.ResourceList {
	offer, _, _ := shareOffer(n)
	out := corev1.ResourceList{}
	for name, q := range n.Status.Allocatable {
		if IsGPUResource(string(name)) || string(name) == offer.Resource {
			out[name] = q
		}
	}
	return out
}
