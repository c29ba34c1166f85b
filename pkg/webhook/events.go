package webhook

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	"github.com/gpuadmit/gpuadmit/pkg/mutate"
)

// maxNote is the longest note events.k8s.io accepts.
const maxNote = 1024

// recorder publishes decisions as Events in the pod's namespace, regarding
// the pod by name (on CREATE it has no UID yet).
type recorder struct{ ev events.EventRecorder }

var _ mutate.Recorder = recorder{}

func (r recorder) Decision(pod *corev1.Pod, res mutate.Result) {
	ref := &corev1.Pod{}
	ref.Namespace, ref.Name = pod.Namespace, pod.Name
	if ref.Name == "" {
		ref.Name = pod.GenerateName
	}
	typ, reason := corev1.EventTypeNormal, "GPUAdmitted"
	if !res.Allowed {
		typ, reason = corev1.EventTypeWarning, "GPUDenied"
	}
	r.ev.Eventf(ref, nil, typ, reason, "Admit", "%s", truncate(res.Explanation))
}

func truncate(s string) string {
	if len(s) <= maxNote {
		return s
	}
	return s[:maxNote-3] + "..."
}

// policyEvents reports policy sets that were not activated as Warning Events
// on this replica's pod, so `kubectl describe pod` shows them.
func policyEvents(ev events.EventRecorder, podName, podNamespace string) func(string, error) {
	return func(path string, err error) {
		if podName == "" || podNamespace == "" {
			return
		}
		ref := &corev1.Pod{}
		ref.Name, ref.Namespace = podName, podNamespace
		ev.Eventf(ref, nil, corev1.EventTypeWarning, "PolicyRejected", "LoadPolicy", "%s", truncate(fmt.Sprintf("policy set at %s not activated, the last good set keeps serving: %s", path, err)))
	}
}
