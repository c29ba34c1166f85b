package placement

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// EventsToRegister names what can undo Filter's only refusal (a container
// asks more shares than one GPU of the node offers): a node whose agent
// publishes a share offer, new or changed. Pod deletions are not
// registered: freeing shares never makes a GPU offer more of them, and the
// refusals that freeing does undo (too few shares on the node, a DRA device
// without room) are NodeResourcesFit's and DynamicResources', whose own
// hints requeue the pod when a pod or claim goes.
func (pl *Plugin) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{{
		Event:          fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAnnotation},
		QueueingHintFn: isSchedulableAfterNodeChange,
	}}, nil
}

// isSchedulableAfterNodeChange queues the pod when a node's share offer
// appeared or changed.
func isSchedulableAfterNodeChange(logger klog.Logger, pod *corev1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	n, ok := newObj.(*corev1.Node)
	if !ok {
		return fwk.Queue, nil
	}
	offer := n.Annotations[allocator.AnnotationShare]
	if offer == "" {
		return fwk.QueueSkip, nil
	}
	if old, ok := oldObj.(*corev1.Node); ok && old.Annotations[allocator.AnnotationShare] == offer {
		return fwk.QueueSkip, nil
	}
	logger.V(5).Info("Share offer changed", "pod", klog.KObj(pod), "node", klog.KObj(n))
	return fwk.Queue, nil
}
