package inventory

import (
	corev1 "k8s.io/api/core/v1"
)

// StripNode is an informer transform (cache.TransformFunc) for Nodes that
// keeps only what Build reads: the name, UID and resourceVersion (an Event
// about a refused node needs them), the labels, the agent's annotations, the
// taints, spec.unschedulable and the allocatable resources. A Node's images, conditions,
// capacity, addresses and managed fields are most of its size, and a cache
// of whole Nodes on a large cluster would not fit the webhook's memory.
// Anything that is not a *corev1.Node (a tombstone) is returned as it is.
func StripNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{TypeMeta: n.TypeMeta}
	out.Name, out.UID, out.ResourceVersion = n.Name, n.UID, n.ResourceVersion
	out.Labels = n.Labels
	for _, k := range builtFromAnnotations {
		if v, ok := n.Annotations[k]; ok {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	out.Spec.Taints = n.Spec.Taints
	out.Spec.Unschedulable = n.Spec.Unschedulable
	out.Status.Allocatable = n.Status.Allocatable
	return out, nil
}
