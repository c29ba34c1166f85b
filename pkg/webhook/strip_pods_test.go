package webhook

import (
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/gpuadmit/gpuadmit/pkg/claim"
	"github.com/gpuadmit/gpuadmit/pkg/mutate"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

// realisticPod is GPU pod i of a Deployment (or, for some i, a Job, a
// Kueue workload, a pod with a share claim) as the API server serves it
// once gpuadmit admitted it and the kubelet ran it: service account
// volume, env, probes, default tolerations, container statuses and
// conditions, managed fields. Its state varies with i: running, pending
// with the scheduler's message, gated, nominated, finished, deleting.
func realisticPod(i int) *corev1.Pod {
	now := metav1.NewTime(metav1.Now().Rfc3339Copy().Time)
	name := fmt.Sprintf("vllm-llama3-8b-7d9c5b6f4-%05d", i)
	p := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, GenerateName: "vllm-llama3-8b-7d9c5b6f4-", Namespace: "team-" + strconv.Itoa(i%7),
			UID: types.UID(fmt.Sprintf("0b6f4c1e-9a7d-4d3e-8f2a-%012d", i)), ResourceVersion: strconv.Itoa(100000 + i),
			CreationTimestamp: now,
			Labels: map[string]string{"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": "llama3-8b",
				"pod-template-hash": "7d9c5b6f4", mutate.LabelManaged: "true"},
			Annotations: map[string]string{
				record.AnnotationDecision:       "vllm: 1 MIG 3g.40gb slice -> nvidia.com/mig-3g.40gb=1 (MIG 3g.40gb, 40448 MiB) [default/profile-to-mig]; pool h100-80gb-mig-mixed; revision sha256-4f1c2a",
				record.AnnotationRequest:        `{"vllm":{"nvidia.com/gpu":"1","nvidia.com/gpumem":"40000"}}`,
				record.AnnotationAcceptedModels: "A100-80GB,H100-80GB",
				"prometheus.io/scrape":          "true", "prometheus.io/port": "8000",
				"kubectl.kubernetes.io/restartedAt": "2026-11-20T10:00:00Z",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "vllm-llama3-8b-7d9c5b6f4",
				UID: "5e0c7e7a-1d2b-4c3d-9e8f-0a1b2c3d4e5f", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: "v1", Time: &now, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app.kubernetes.io/name":{},"f:pod-template-hash":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"5e0c7e7a\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"vllm\"}":{".":{},"f:args":{},"f:env":{},"f:image":{},"f:name":{},"f:ports":{},"f:resources":{}}}}}`)}},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now, FieldsType: "FieldsV1", Subresource: "status",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"10.244.3.17\"}":{".":{},"f:ip":{}}},"f:startTime":{}}}`)}}},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "vllm", Image: "vllm/vllm-openai:v0.11.0",
				Command: []string{"python3", "-m", "vllm.entrypoints.openai.api_server"},
				Args:    []string{"--model", "meta-llama/Meta-Llama-3-8B-Instruct", "--gpu-memory-utilization", "0.9", "--max-model-len", "8192", "--port", "8000"},
				Ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: 8000, Protocol: corev1.ProtocolTCP}},
				Env: []corev1.EnvVar{{Name: "HF_HOME", Value: "/models/cache"}, {Name: "VLLM_LOGGING_LEVEL", Value: "INFO"},
					{Name: "HUGGING_FACE_HUB_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "hf-token"}, Key: "token"}}},
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}},
				Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{"cpu": resource.MustParse("8"), "memory": resource.MustParse("32Gi"), "nvidia.com/mig-3g.40gb": resource.MustParse("1"),
						"gpuadmit.io/gpu-memory-mib": resource.MustParse("40448"), "gpuadmit.io/h100-80gb-mib": resource.MustParse("40448")},
					Requests: corev1.ResourceList{"cpu": resource.MustParse("4"), "memory": resource.MustParse("24Gi"), "nvidia.com/mig-3g.40gb": resource.MustParse("1"),
						"gpuadmit.io/gpu-memory-mib": resource.MustParse("40448"), "gpuadmit.io/h100-80gb-mib": resource.MustParse("40448")},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "models", MountPath: "/models"}, {Name: "shm", MountPath: "/dev/shm"},
					{Name: "kube-api-access-x7k2p", ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(8000), Scheme: "HTTP"}},
					PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: "File", ImagePullPolicy: "IfNotPresent",
			}},
			Volumes: []corev1.Volume{
				{Name: "models", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "models"}}},
				{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: "Memory", SizeLimit: ptr.To(resource.MustParse("8Gi"))}}},
				{Name: "kube-api-access-x7k2p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](420), Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To[int64](3607), Path: "token"}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
				}}}},
			},
			RestartPolicy: "Always", TerminationGracePeriodSeconds: ptr.To[int64](30), DNSPolicy: "ClusterFirst",
			ServiceAccountName: "default", DeprecatedServiceAccount: "default", SecurityContext: &corev1.PodSecurityContext{},
			SchedulerName: "default-scheduler", PriorityClassName: "gpuadmit-inference", Priority: ptr.To[int32](100000),
			PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority), EnableServiceLinks: ptr.To(true),
			NodeSelector: map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/mig.strategy": "mixed"},
			Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: "Exists", Effect: "NoSchedule"},
				{Key: "node.kubernetes.io/not-ready", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: ptr.To[int64](300)},
				{Key: "node.kubernetes.io/unreachable", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: ptr.To[int64](300)}},
		},
	}
	setState(p, i, now)
	setKind(p, i)
	return p
}

// setState puts pod i in one of the states the readers tell apart.
func setState(p *corev1.Pod, i int, now metav1.Time) {
	switch i % 10 {
	case 7: // pending: the scheduler said why
		p.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBurstable, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
			Status: corev1.ConditionFalse, Reason: "Unschedulable", LastTransitionTime: now,
			Message: "0/5000 nodes are available: 4990 Insufficient nvidia.com/mig-3g.40gb, 10 node(s) had untolerated taint {nvidia.com/gpu: }. preemption: 0/5000 nodes are available."}}}
	case 8: // pending, nominated by preemption
		p.Status = corev1.PodStatus{Phase: corev1.PodPending, NominatedNodeName: fmt.Sprintf("gpu-%04d", i%5000), QOSClass: corev1.PodQOSBurstable}
	case 9: // gated
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}}
		p.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBurstable, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
			Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated, Message: "Scheduling is blocked due to non-empty scheduling gates", LastTransitionTime: now}}}
	case 6: // finished
		p.Spec.NodeName = fmt.Sprintf("gpu-%04d", i%5000)
		p.Status = runningStatus(now)
		p.Status.Phase = corev1.PodSucceeded
	default:
		p.Spec.NodeName = fmt.Sprintf("gpu-%04d", i%5000)
		p.Status = runningStatus(now)
	}
	if i%13 == 0 {
		p.DeletionTimestamp = &now
		p.DeletionGracePeriodSeconds = ptr.To[int64](30)
	}
}

// setKind makes some pods a Job's Kueue workload, some share a GPU by a claim, some run a sidecar.
func setKind(p *corev1.Pod, i int) {
	switch i % 4 {
	case 1:
		p.Labels[mutate.LabelKueuePodSet] = "main"
		p.Spec.SchedulerName = SchedulerName
	case 2:
		p.Labels[claim.LabelShare] = "true"
		c := &p.Spec.Containers[0]
		delete(c.Resources.Requests, "nvidia.com/mig-3g.40gb")
		delete(c.Resources.Limits, "nvidia.com/mig-3g.40gb")
		c.Resources.Claims = []corev1.ResourceClaim{{Name: claim.PodClaimPrefix + "vllm"}}
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: claim.PodClaimPrefix + "vllm", ResourceClaimTemplateName: ptr.To(claim.TemplateName(20480))}}
		if i%8 == 6 { // DRA alternatives: a MIG slice on H100 or a share on A100, the template named in the pod's record
			alts := []claim.Alternative{{Backend: claim.BackendMIG, Model: "H100-80GB", Profile: "3g.40gb", Count: 1},
				{Backend: claim.BackendShared, Model: "A100-80GB", MiB: 40448}}
			name := claim.AlternativesTemplateName(alts)
			p.Spec.ResourceClaims[0].ResourceClaimTemplateName = ptr.To(name)
			p.Annotations[claim.AnnotationAlternatives] = claim.EncodeAlternatives(map[string][]claim.Alternative{name: alts})
			delete(p.Annotations, record.AnnotationAcceptedModels) // written only where gpuadmit picks one pool
		}
	case 3:
		p.OwnerReferences = nil // a bare pod
		// A warm-up init container that takes two slices (the pod's GPU
		// demand is the larger of it and the app containers) and a sidecar.
		p.Spec.InitContainers = []corev1.Container{{Name: "warmup", Image: "vllm/vllm-openai:v0.11.0",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/mig-3g.40gb": resource.MustParse("2"),
				"gpuadmit.io/gpu-memory-mib": resource.MustParse("80896"), "gpuadmit.io/h100-80gb-mib": resource.MustParse("80896")}}},
			{Name: "log-shipper", Image: "fluent/fluent-bit:4.0", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("100m"), "memory": resource.MustParse("64Mi")}}}}
		p.Spec.Overhead = corev1.ResourceList{"cpu": resource.MustParse("250m")}
	}
}

func runningStatus(now metav1.Time) corev1.PodStatus {
	return corev1.PodStatus{
		Phase: corev1.PodRunning, HostIP: "10.0.12.34", HostIPs: []corev1.HostIP{{IP: "10.0.12.34"}},
		PodIP: "10.244.3.17", PodIPs: []corev1.PodIP{{IP: "10.244.3.17"}}, StartTime: &now, QOSClass: corev1.PodQOSBurstable,
		Conditions: []corev1.PodCondition{
			{Type: "PodReadyToStartContainers", Status: "True", LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: "True", LastTransitionTime: now},
			{Type: corev1.PodReady, Status: "True", LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: "True", LastTransitionTime: now},
			{Type: corev1.PodScheduled, Status: "True", LastTransitionTime: now},
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "vllm", Ready: true, Started: ptr.To(true), RestartCount: 0, Image: "docker.io/vllm/vllm-openai:v0.11.0",
			ImageID:     "docker.io/vllm/vllm-openai@sha256:9a1f0c7e0d3b2a4f5e6d7c8b9a0f1e2d3c4b5a69788f7e6d5c4b3a2918070605",
			ContainerID: "containerd://4b3a2918070605f9a1f0c7e0d3b2a4f5e6d7c8b9a0f1e2d3c4b5a69788f7e6d5c",
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			VolumeMounts: []corev1.VolumeMountStatus{{Name: "models", MountPath: "/models"}, {Name: "shm", MountPath: "/dev/shm"},
				{Name: "kube-api-access-x7k2p", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true, RecursiveReadOnly: ptr.To(corev1.RecursiveReadOnlyDisabled)}},
		}},
	}
}

// decoded is p as an informer holds it: decoded from the API server's
// JSON, each string and map its own allocation.
func decoded(p *corev1.Pod) *corev1.Pod {
	b, err := json.Marshal(p)
	if err != nil {
		panic(err)
	}
	out := &corev1.Pod{}
	if err := json.Unmarshal(b, out); err != nil {
		panic(err)
	}
	return out
}
