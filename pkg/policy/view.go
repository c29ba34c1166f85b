package policy

import (
	corev1 "k8s.io/api/core/v1"
)

// PodView is input.pod: the part of a pod a policy may read. It keeps the
// JSON names of the Pod it comes from (input.pod.spec.nodeSelector), so a
// policy reads it as it would read the pod, but it holds only what a
// decision is about — the pod's namespace, labels and annotations, its GPU
// containers' names and resources, and how it is scheduled — and none of
// what tells the pods of one workload apart (their names, the index labels
// of a StatefulSet, an indexed Job or a LeaderWorkerSet). Pods of one
// template therefore have one view, and gpuadmit decides the template once.
type PodView struct {
	Metadata PodMeta     `json:"metadata"`
	Spec     PodSpecView `json:"spec"`
}

// PodMeta is a pod's namespace, labels and annotations, less the
// per-pod keys (perPodKeys).
type PodMeta struct {
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// PodSpecView is the part of a pod's spec a policy may read.
type PodSpecView struct {
	Containers        []ContainerView                   `json:"containers"`
	InitContainers    []ContainerView                   `json:"initContainers,omitempty"`
	ResourceClaims    []corev1.PodResourceClaim         `json:"resourceClaims,omitempty"`
	NodeSelector      map[string]string                 `json:"nodeSelector,omitempty"`
	NodeName          string                            `json:"nodeName,omitempty"`
	Affinity          *corev1.Affinity                  `json:"affinity,omitempty"`
	Tolerations       []corev1.Toleration               `json:"tolerations,omitempty"`
	SchedulerName     string                            `json:"schedulerName,omitempty"`
	PriorityClassName string                            `json:"priorityClassName,omitempty"`
	Priority          *int32                            `json:"priority,omitempty"`
	PreemptionPolicy  *corev1.PreemptionPolicy          `json:"preemptionPolicy,omitempty"`
	RuntimeClassName  *string                           `json:"runtimeClassName,omitempty"`
	Overhead          corev1.ResourceList               `json:"overhead,omitempty"`
	SchedulingGates   []corev1.PodSchedulingGate        `json:"schedulingGates,omitempty"`
	TopologySpread    []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
}

// ContainerView is a container's name, resources and (init containers)
// restart policy: what tells an app container, an init container and a
// sidecar apart, and what it asks for.
type ContainerView struct {
	Name          string                         `json:"name"`
	Resources     corev1.ResourceRequirements    `json:"resources"`
	RestartPolicy *corev1.ContainerRestartPolicy `json:"restartPolicy,omitempty"`
}

// perPodKeys are labels and annotations that controllers set to tell the
// pods of one workload apart; a view leaves them out.
var perPodKeys = map[string]bool{
	"statefulset.kubernetes.io/pod-name":          true,
	"apps.kubernetes.io/pod-index":                true,
	"batch.kubernetes.io/job-completion-index":    true,
	"batch.kubernetes.io/job-index-failure-count": true,
	"leaderworkerset.sigs.k8s.io/worker-index":    true,
	"leaderworkerset.sigs.k8s.io/group-index":     true,
	"leaderworkerset.sigs.k8s.io/leader-name":     true,
	"jobset.sigs.k8s.io/job-index":                true,
	"jobset.sigs.k8s.io/job-global-index":         true,
	"jobset.sigs.k8s.io/restart-attempt":          true,
}

// View is pod's view for a policy. It shares nothing mutable with pod that
// a policy evaluation could change (evaluation never writes its input).
func View(pod *corev1.Pod) *PodView {
	s := &pod.Spec
	v := &PodView{
		Metadata: PodMeta{Namespace: pod.Namespace, Labels: withoutPerPod(pod.Labels), Annotations: withoutPerPod(pod.Annotations)},
		Spec: PodSpecView{
			Containers: containerViews(s.Containers), InitContainers: containerViews(s.InitContainers),
			ResourceClaims: s.ResourceClaims, NodeSelector: s.NodeSelector, NodeName: s.NodeName,
			Affinity: s.Affinity, Tolerations: s.Tolerations, SchedulerName: s.SchedulerName,
			PriorityClassName: s.PriorityClassName, Priority: s.Priority, PreemptionPolicy: s.PreemptionPolicy,
			RuntimeClassName: s.RuntimeClassName, Overhead: s.Overhead, SchedulingGates: s.SchedulingGates,
			TopologySpread: s.TopologySpreadConstraints,
		},
	}
	if v.Spec.Containers == nil {
		v.Spec.Containers = []ContainerView{}
	}
	return v
}

func containerViews(cs []corev1.Container) []ContainerView {
	if len(cs) == 0 {
		return nil
	}
	out := make([]ContainerView, len(cs))
	for i := range cs {
		out[i] = ContainerView{Name: cs[i].Name, Resources: cs[i].Resources, RestartPolicy: cs[i].RestartPolicy}
	}
	return out
}

func withoutPerPod(m map[string]string) map[string]string {
	drop := 0
	for k := range m {
		if perPodKeys[k] {
			drop++
		}
	}
	if drop == 0 {
		return m
	}
	out := make(map[string]string, len(m)-drop)
	for k, val := range m {
		if !perPodKeys[k] {
			out[k] = val
		}
	}
	return out
}
