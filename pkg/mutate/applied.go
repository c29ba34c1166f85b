package mutate

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

// appliedWarning warns about a pod that client-side `kubectl apply` created
// (it carries kubectl's last-applied-configuration) and whose GPU resources
// gpuadmit rewrote: applying the same file again asks the API server to put
// the resources back, which it refuses, since a pod's resources cannot
// change, with a diff that reads as if the file were wrong. Empty for
// other pods, and when the resources stay as the author wrote them.
func appliedWarning(arrived, admitted *corev1.Pod) string {
	if _, applied := arrived.Annotations[corev1.LastAppliedConfigAnnotation]; !applied || !gpuChanged(arrived, admitted) {
		return ""
	}
	return "gpuadmit rewrote the GPU resources of this pod, which `kubectl apply` created: applying the same file again " +
		"asks to put them back, which the API server refuses (a pod's resources cannot change). To change the pod, " +
		"recreate it (kubectl replace --force -f <file>); better, apply a workload (a Deployment, a Job), whose pods gpuadmit rewrites as they are made"
}

// gpuChanged: some GPU limit or request the author wrote into a is gone or
// different in b. Keys gpuadmit only added (the accounting resources, the
// requests it sets equal to limits) are no change to kubectl: they are not
// in its last-applied configuration, so it leaves them alone.
func gpuChanged(a, b *corev1.Pod) bool {
	for _, pair := range [][2][]corev1.Container{{a.Spec.InitContainers, b.Spec.InitContainers}, {a.Spec.Containers, b.Spec.Containers}} {
		for i := range min(len(pair[0]), len(pair[1])) {
			wrote, got := record.OriginalGPU(&pair[0][i]), record.OriginalGPU(&pair[1][i])
			if len(record.MissingEntries("limits", got.Limits, wrote.Limits)) > 0 ||
				len(record.MissingEntries("requests", got.Requests, wrote.Requests)) > 0 {
				return true
			}
		}
	}
	return false
}
