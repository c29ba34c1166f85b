package webhook

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/gpuadmit/gpuadmit/pkg/mutate"
)

// maxNote is the longest note events.k8s.io accepts.
const maxNote = 1024

// Reasons of the Events gpuadmit records about admissions.
const (
	ReasonDenied   = "GPUDenied"
	ReasonWarning  = "GPUWarning"
	ReasonFallback = "GPUFallback"
	ReasonAdmitted = "GPUAdmitted"
)

// recorder publishes decisions as Events, as Kyverno does: for denials,
// warnings and fallbacks, and for plain successes only when admitted is set
// (the decision annotation already records every decision).
type recorder struct {
	ev       events.EventRecorder
	admitted bool
}

var _ mutate.Recorder = recorder{}

// Decision records at most one Event for the decision on pod.
func (r recorder) Decision(pod *corev1.Pod, res mutate.Result) {
	typ, reason, note := r.classify(res)
	if reason == "" {
		return
	}
	r.ev.Eventf(regarding(pod), related(pod), typ, reason, "Admit", "%s", truncate(podName(pod)+": "+note))
}

// related names the pod the decision was about, as the Event's related
// object. client-go's events broadcaster merges Events into one series (a
// count, and the first Event's note) when their type, reason, action,
// reporting instance, regarding and related objects are equal: the note is
// not part of that key. Every pod of a namespace (or of a controller) has
// the same regarding object, so without the pod here the denials of
// different pods merged into one Event showing the first pod's message.
// With it, only one pod's repeats merge: a bare pod's by its name, a
// controller's by its generateName (its pods are copies of one template).
// The pod may never exist; the reference names it and nothing reads it.
func related(pod *corev1.Pod) *corev1.ObjectReference {
	name := pod.Name
	if name == "" {
		name = pod.GenerateName
	}
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: name}
}

// podName is how a note names the pod: `kubectl events` and `kubectl
// describe` show the regarding object (the namespace or the controller)
// and the note, not the related object.
func podName(pod *corev1.Pod) string {
	if pod.Name == "" && pod.GenerateName != "" {
		return fmt.Sprintf("Pod %s<generated>", pod.GenerateName)
	}
	return "Pod " + pod.Name
}

// classify picks the Event for a result, or no reason for none.
func (r recorder) classify(res mutate.Result) (typ, reason, note string) {
	switch {
	case !res.Allowed:
		return corev1.EventTypeWarning, ReasonDenied, res.Explanation
	case len(res.Warnings) > 0:
		return corev1.EventTypeWarning, ReasonWarning, strings.Join(res.Warnings, "; ") + ". " + res.Explanation
	case len(res.PassedOver) > 0:
		return corev1.EventTypeNormal, ReasonFallback, res.Explanation
	case r.admitted:
		return corev1.EventTypeNormal, ReasonAdmitted, res.Explanation
	}
	return "", "", ""
}

// regarding is an object that exists for the Event to be about. On CREATE
// the pod does not exist yet (a controller's pod has not even a name, only
// generateName), so the Event regards the pod's controller (ownerReferences
// with controller: true, e.g. its ReplicaSet or Job), where `kubectl
// describe` of the workload shows it, and otherwise the pod's Namespace.
// The reference carries the pod's namespace so that the Event is stored
// there (`kubectl events -n <namespace>`), also when it regards the
// cluster-scoped Namespace.
func regarding(pod *corev1.Pod) *corev1.ObjectReference {
	if o := metav1.GetControllerOfNoCopy(pod); o != nil {
		return &corev1.ObjectReference{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name, UID: o.UID, Namespace: pod.Namespace}
	}
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: pod.Namespace, Namespace: pod.Namespace}
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

// recordKeyEvents reports a missing record key as a Warning Event on this
// replica's pod, so `kubectl describe pod` shows what the log line says.
func recordKeyEvents(ev events.EventRecorder, podName, podNamespace, dir string) func() {
	return func() {
		if podName == "" || podNamespace == "" {
			return
		}
		ref := &corev1.Pod{}
		ref.Name, ref.Namespace = podName, podNamespace
		ev.Eventf(ref, nil, corev1.EventTypeWarning, "RecordKeyMissing", "LoadRecordKey", "no record key in %s (the Secret %s in namespace %s): "+
			"gpuadmit's record on the pods it admits is not sealed, and a pod that comes back (reinvocation, a saved pod applied again) is decided again "+
			"and refused if the decision changed; create the Secret: kubectl -n %s create secret generic %s --from-literal=current=$(openssl rand -hex 32)",
			dir, recordKeySecret, podNamespace, podNamespace, recordKeySecret)
	}
}
