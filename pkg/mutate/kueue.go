package mutate

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/intent"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

// Kueue's labels that gpuadmit reads. Kueue admits a workload on its pod
// template as written, before any pod exists; its pods then must not ask for
// other GPU than Kueue counted.
const (
	// LabelKueueQueue puts a Job in a Kueue LocalQueue.
	LabelKueueQueue = "kueue.x-k8s.io/queue-name"
	// LabelKueuePodSet is set by Kueue on the pod template of a workload it
	// admitted and starts (every job integration): the pods are Kueue's.
	LabelKueuePodSet = "kueue.x-k8s.io/podset"
)

// JobHandler is the mutating admission webhook for Kueue-managed batch/v1
// Jobs (/mutate-batch-v1-job): it decides the Job's pod template on CREATE as
// the pod webhook decides a pod and writes the decision into the template.
// Kueue then admits the workload on the GPU its pods will get (a MIG slice,
// a share, whole GPUs and gpuadmit's accounting resources, not the dialect
// the author wrote), and the pods arrive with gpuadmit's sealed record and
// pass the pod webhook unchanged: the seal is bound to the Job, and holds
// on the pods the live Job owns for as long as it lives, whatever the
// policy says meanwhile (see Mutator.stale).
type JobHandler struct {
	pods *Handler
}

// NewJobHandler decides Job templates with the pod handler's mutator, namespace and quota readers.
func NewJobHandler(pods *Handler) *JobHandler { return &JobHandler{pods: pods} }

var _ admission.Handler = (*JobHandler)(nil)

// JobTemplatePath is where a Job's pod template lives; the pod decision's
// patch is rooted there.
const JobTemplatePath = "/spec/template"

// Handle answers one review of a Job.
func (h *JobHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := h.pods.opts.Clock.Now()
	resp, outcome := h.handle(ctx, req)
	reviews.WithLabelValues("mutate-job", outcome).Inc()
	reviewDuration.WithLabelValues("mutate-job").Observe(h.pods.opts.Clock.Since(start).Seconds())
	return resp
}

func (h *JobHandler) handle(ctx context.Context, req admission.Request) (admission.Response, string) {
	if req.Kind.Group != batchv1.GroupName || req.Kind.Kind != "Job" {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("gpuadmit's Job webhook admits batch/v1 Jobs; this review is for %s", req.Kind.String())), OutcomeErrored
	}
	if req.Operation != admissionv1.Create {
		return admission.Allowed("gpuadmit decides a Job's pod template on CREATE only"), OutcomeAllowed
	}
	job := &batchv1.Job{}
	if err := h.pods.decoder.DecodeRaw(req.Object, job); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode job: %w", err)), OutcomeErrored
	}
	if _, kueue := job.Labels[LabelKueueQueue]; !kueue {
		return admission.Allowed("the Job is not in a Kueue queue; gpuadmit decides its pods when they are created"), OutcomeAllowed
	}
	// A Job another workload controls (a JobSet's, say) was counted by
	// Kueue as its parent's template says; deciding its template now would
	// change it behind that count. Its pods meet the rule for Kueue's pods
	// instead. A CronJob's Jobs are Kueue's workloads themselves.
	if owner := metav1.GetControllerOf(job); owner != nil && owner.Kind != "CronJob" {
		return admission.Allowed(fmt.Sprintf("the Job belongs to %s %s, which Kueue admitted as a whole; gpuadmit checks its pods when they are created", owner.Kind, owner.Name)), OutcomeAllowed
	}
	pod := TemplatePod(req.Namespace, job.Name, job.GenerateName, &job.Spec.Template)
	res, err := h.pods.decide(ctx, req, pod, &record.WorkloadRef{Kind: "Job", Name: job.Name, GenerateName: job.GenerateName})
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err), OutcomeErrored
	}
	if !res.Allowed {
		res.Message = "spec.template: " + res.Message
	}
	res.Patch = underPath(JobTemplatePath, res.Patch)
	resp, outcome := response(res)
	logf.FromContext(ctx).Info("job template decision", "job", jobRef(req.Namespace, job), "revision", res.Revision, "outcome", outcome,
		"decision", res.Pod.Annotations[record.AnnotationDecision], "message", res.Message)
	return resp, outcome
}

// TemplatePod is the pod a workload's template makes, as the pod webhook
// will see it: the template's metadata and spec in the workload's namespace,
// named after the workload.
func TemplatePod(namespace, name, generateName string, t *corev1.PodTemplateSpec) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: *t.ObjectMeta.DeepCopy(), Spec: *t.Spec.DeepCopy()}
	pod.Namespace = namespace
	if pod.Name == "" && pod.GenerateName == "" {
		switch {
		case name != "":
			pod.GenerateName = name + "-"
		default:
			pod.GenerateName = generateName
		}
	}
	return pod
}

// underPath roots a pod patch at a template's path; a pod's TypeMeta and
// status are never patched (both are empty in a template and in the decision).
func underPath(root string, patch []jsonpatch.Operation) []jsonpatch.Operation {
	out := make([]jsonpatch.Operation, len(patch))
	for i, op := range patch {
		op.Path = root + op.Path
		out[i] = op
	}
	return out
}

func jobRef(namespace string, job *batchv1.Job) string {
	name := job.Name
	if name == "" {
		name = job.GenerateName
	}
	return namespace + "/" + name
}

// kueueUncounted is the denial of a pod of a workload Kueue admitted (its
// template carries Kueue's podset label) that gpuadmit would give other GPU
// than its template asked for: Kueue counted the template, so the pod must
// arrive as it will run. Templates gpuadmit decided (Kueue's batch/v1 Jobs)
// carry gpuadmit's record and never get here. It returns "" when the decided
// pod asks for the same GPU as the one that arrived.
func kueueUncounted(arrived *corev1.Pod, decided *corev1.Pod) string {
	if _, ok := arrived.Labels[LabelKueuePodSet]; !ok {
		return ""
	}
	var parts []string
	before, after := record.AllContainers(arrived), record.AllContainers(decided)
	for i := range before {
		if i >= len(after) {
			break
		}
		was, is := countedGPU(&before[i]), countedGPU(&after[i])
		if was == is {
			continue
		}
		parts = append(parts, fmt.Sprintf("container %q asks for %s, which gpuadmit would turn into %s", before[i].Name, orNothing(was), orNothing(is)))
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("spec.containers[*].resources: Kueue admitted this pod's workload (label %s=%s) counting the GPU its pod template asks for, "+
		"but %s; the pod would hold GPU Kueue did not count. Write what gpuadmit gives in the workload's pod template, "+
		"or let gpuadmit rewrite the template itself (it does for batch/v1 Jobs in a Kueue queue)",
		LabelKueuePodSet, arrived.Labels[LabelKueuePodSet], strings.Join(parts, "; "))
}

// countedGPU is a container's GPU as Kueue counts it: its GPU resource
// limits other than gpuadmit's accounting, and its resource claims.
func countedGPU(c *corev1.Container) string {
	var parts []string
	for k, q := range c.Resources.Limits {
		if intent.IsGPUResource(k) && !allocator.IsAccountingResource(string(k)) {
			parts = append(parts, fmt.Sprintf("%s: %s", k, intent.FormatQuantity(q)))
		}
	}
	for _, rc := range c.Resources.Claims {
		parts = append(parts, "resource claim "+rc.Name)
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

func orNothing(s string) string {
	if s == "" {
		return "no GPU resource"
	}
	return s
}
