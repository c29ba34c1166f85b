package webhook

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/claim"
	"github.com/gpuadmit/gpuadmit/pkg/mutate"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

// podAnnotations are the only pod annotations any reader of the cache
// reads: the decision record names the pool of a pod that has no node yet
// (mutate.PoolOf: free capacity, the usage report, the scheduler handover),
// and a pod with DRA alternatives records its claim templates' specs
// (claim.AnnotationAlternatives: the claim-template reconciler makes them
// from it), and a pod placed on one pool the GPU models it accepts
// (record.AnnotationAcceptedModels: the pick's prices, workload).
var podAnnotations = []string{record.AnnotationDecision, claim.AnnotationAlternatives, record.AnnotationAcceptedModels}

// podLabels are the only pod labels any reader of the cache reads or
// selects by: gpuadmit's mark (the handover lists by it), the share-claim
// mark (the claim reconciler watches and lists by it) and Kueue's pod set
// (a Kueue pod is not replaced by the handover).
var podLabels = []string{mutate.LabelManaged, claim.LabelShare, mutate.LabelKueuePodSet}

// StripPod is the Pod informer's transform (cache.TransformFunc): it keeps
// of gpuadmit's pods only what the cache's readers read, so that a replica's
// memory grows by a few hundred bytes per GPU pod, not by the whole pod
// (images, commands, env, volumes, probes, container statuses: several KB).
// The readers and what they read:
//   - free capacity (tally, ledger): name, generateName, namespace,
//     spec.nodeName, status.nominatedNodeName and phase, the decision
//     record's pool, the containers' requests (resourcehelper.PodRequests:
//     init containers and their restartPolicy, overhead, the pod-level
//     resources its CPU and memory are counted by);
//   - the usage report (pkg/usage): the same, and spec.schedulingGates and
//     the PodScheduled condition (why a pod waits), the containers' claims;
//   - the scheduler handover (handover.WaitingOf): uid, deletionTimestamp,
//     spec.schedulerName, the controller owner reference, Kueue's label;
//   - the claim-template reconciler (pkg/claim): the share label, phase,
//     spec.resourceClaims, the alternatives record;
//   - the pick's prices (workload): the accepted-models record, and the
//     same placement and requests as free capacity;
//   - the cache's own label selectors: podLabels.
//
// TestStripPodKeepsWhatTheReadersRead decodes stripped and whole pods
// through each of them. Anything that is not a *corev1.Pod (a tombstone)
// is returned as it is.
func StripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{TypeMeta: p.TypeMeta}
	stripPodMeta(p, out)
	out.Spec = corev1.PodSpec{
		NodeName:          p.Spec.NodeName,
		SchedulerName:     p.Spec.SchedulerName,
		Priority:          p.Spec.Priority,
		PriorityClassName: p.Spec.PriorityClassName,
		SchedulingGates:   p.Spec.SchedulingGates,
		ResourceClaims:    p.Spec.ResourceClaims,
		Overhead:          p.Spec.Overhead,
		Resources:         p.Spec.Resources,
		InitContainers:    stripContainers(p.Spec.InitContainers),
		Containers:        stripContainers(p.Spec.Containers),
	}
	out.Status = corev1.PodStatus{Phase: p.Status.Phase, NominatedNodeName: p.Status.NominatedNodeName}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			out.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}}
		}
	}
	return out, nil
}

// stripPodMeta keeps the pod's identity, owners and the labels and
// annotations gpuadmit reads.
func stripPodMeta(p, out *corev1.Pod) {
	out.Name, out.GenerateName, out.Namespace = p.Name, p.GenerateName, p.Namespace
	out.UID, out.ResourceVersion = p.UID, p.ResourceVersion
	out.DeletionTimestamp = p.DeletionTimestamp
	out.OwnerReferences = p.OwnerReferences
	out.Labels = only(p.Labels, podLabels)
	out.Annotations = only(p.Annotations, podAnnotations)
}

// only is the entries of m under keys, nil when it has none.
func only(m map[string]string, keys []string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = make(map[string]string, len(keys))
			}
			out[k] = v
		}
	}
	return out
}

// stripContainers keeps each container's name, requests, claims and
// restartPolicy (a sidecar's counts as an app container's).
func stripContainers(cs []corev1.Container) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy,
			Resources: corev1.ResourceRequirements{Requests: c.Resources.Requests, Claims: c.Resources.Claims}}
	}
	return out
}
