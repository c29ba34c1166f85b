package mutate

import (
	"context"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"

	"github.com/gpuadmit/gpuadmit/pkg/intent"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/write"
)

// NamespaceGetter returns a pod's namespace (labels and annotations feed the policy).
type NamespaceGetter interface {
	Namespace(ctx context.Context, name string) (*corev1.Namespace, error)
}

// Recorder publishes a decision as a Kubernetes Event.
type Recorder interface {
	Decision(pod *corev1.Pod, res Result)
}

// QuotaGetter returns a namespace's gpuadmit ResourceQuota, or nil when it has none.
type QuotaGetter interface {
	Quota(ctx context.Context, namespace string) (*corev1.ResourceQuota, error)
}

// HandlerOptions tunes a Handler. The zero value works.
type HandlerOptions struct {
	// Quotas gives policies the namespace's quota and usage; nil gives none.
	Quotas QuotaGetter
	// Recorder publishes decisions as Events; nil records none.
	Recorder Recorder
	// Clock times reviews; nil means the real clock.
	Clock clock.PassiveClock
}

// Handler is the mutating admission webhook for pods (/mutate-v1-pod).
type Handler struct {
	m       *Mutator
	ns      NamespaceGetter
	decoder admission.Decoder
	opts    HandlerOptions
}

var _ admission.Handler = (*Handler)(nil)

// NewHandler serves m's decisions as admission responses.
func NewHandler(m *Mutator, ns NamespaceGetter, scheme *runtime.Scheme, opts HandlerOptions) *Handler {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Handler{m: m, ns: ns, decoder: admission.NewDecoder(scheme), opts: opts}
}

// Handle answers one review: a policy "no" is Denied, gpuadmit's own failure
// is Errored (and logged once), never the other way round.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := h.opts.Clock.Now()
	resp, outcome := h.handle(ctx, req)
	reviews.WithLabelValues("mutate", outcome).Inc()
	reviewDuration.WithLabelValues("mutate").Observe(h.opts.Clock.Since(start).Seconds())
	return resp
}

func (h *Handler) handle(ctx context.Context, req admission.Request) (admission.Response, string) {
	pod, err := decodePod(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err), OutcomeErrored
	}
	if req.Operation != admissionv1.Create {
		return admission.Allowed("gpuadmit mutates pods on CREATE only"), OutcomeAllowed
	}
	res, err := h.decide(ctx, req, pod, nil)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err), OutcomeErrored
	}
	return response(res)
}

// decide decides for pod, a pod being created or (workload not nil) that
// workload's pod template, with the namespace and quota of the review. Its
// callers answer with response, which gives the outcome.
func (h *Handler) decide(ctx context.Context, req admission.Request, pod *corev1.Pod, workload *record.WorkloadRef) (Result, error) {
	log := logf.FromContext(ctx)
	ns, err := h.ns.Namespace(ctx, req.Namespace)
	if err != nil {
		log.Error(err, "read namespace", "namespace", req.Namespace)
		return Result{}, fmt.Errorf("read namespace %s: %w", req.Namespace, err)
	}
	var rq *corev1.ResourceQuota
	if h.opts.Quotas != nil {
		if rq, err = h.opts.Quotas.Quota(ctx, req.Namespace); err != nil {
			log.Error(err, "read quota", "namespace", req.Namespace)
			return Result{}, err
		}
	}
	start := h.opts.Clock.Now()
	mreq := Request{Pod: pod, Namespace: ns, Operation: string(req.Operation), UserInfo: req.UserInfo, Quota: rq,
		DryRun: req.DryRun != nil && *req.DryRun}
	if workload != nil {
		mreq.Template, mreq.Workload = true, *workload
	}
	res, err := h.m.Mutate(ctx, mreq)
	if err != nil {
		log.Error(err, "decision failed", "pod", podRef(pod))
		return Result{}, err
	}
	if workload == nil {
		h.report(ctx, req, pod, res, outcomeOf(res), h.opts.Clock.Since(start).Seconds())
	}
	return res, nil
}

// outcomeOf is the review outcome res answers with (the metrics' label).
func outcomeOf(res Result) string {
	switch {
	case !res.Allowed:
		return OutcomeDenied
	case len(res.Patch) == 0:
		return OutcomeAllowed
	}
	return OutcomeMutated
}

// response is the review's answer for res, and its outcome.
func response(res Result) (admission.Response, string) {
	switch outcome := outcomeOf(res); outcome {
	case OutcomeDenied:
		return admission.Denied(res.Message).WithWarnings(res.Warnings...), outcome
	case OutcomeAllowed:
		return admission.Allowed("").WithWarnings(res.Warnings...), outcome
	default:
		patch, err := write.MarshalPatch(res.Patch)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("encode the patch: %w", err)), OutcomeErrored
		}
		resp := admission.Allowed("").WithWarnings(res.Warnings...)
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = patch, &pt
		return resp, outcome
	}
}

// report writes the decision log line and, outside dry runs, the Event.
func (h *Handler) report(ctx context.Context, req admission.Request, pod *corev1.Pod, res Result, outcome string, seconds float64) {
	log := logf.FromContext(ctx)
	if res.Revision == "" && res.Allowed {
		log.V(2).Info("no GPU asked", "pod", podRef(pod), "outcome", outcome)
		return
	}
	log.Info("decision", "pod", podRef(pod), "user", req.UserInfo.Username, "revision", res.Revision, "outcome", outcome,
		"asked", asked(pod), "decision", res.Pod.Annotations[record.AnnotationDecision], "message", res.Message,
		"dryRun", req.DryRun != nil && *req.DryRun, "seconds", seconds)
	// An allowed answer without a patch for a GPU pod is a pod gpuadmit already
	// decided (reinvocation, a re-applied saved pod): its Event was recorded then.
	if h.opts.Recorder != nil && (req.DryRun == nil || !*req.DryRun) && outcome != OutcomeAllowed {
		h.opts.Recorder.Decision(pod, res)
	}
}

// askedAnnotations is the key of asked's entry for the pod annotations that
// ask for GPU; no container can have that name (a DNS label has no dot).
const askedAnnotations = "metadata.annotations"

// asked is the GPU request as it arrived, for the log line: each GPU
// container's GPU limits under its name, and KAI's pod annotations, which ask
// on a container's behalf, under askedAnnotations. Nil when none.
func asked(pod *corev1.Pod) map[string]map[string]string {
	var out map[string]map[string]string
	add := func(key string, m map[string]string) {
		if len(m) == 0 {
			return
		}
		if out == nil {
			out = map[string]map[string]string{}
		}
		out[key] = m
	}
	for _, c := range record.AllContainers(pod) {
		add(c.Name, record.OriginalGPU(&c).Limits)
	}
	kai := map[string]string{}
	for _, k := range []string{intent.AnnotationKAIFraction, intent.AnnotationKAIMemory, intent.AnnotationKAINumDevices, intent.AnnotationKAIContainerName} {
		if v, ok := pod.Annotations[k]; ok {
			kai[k] = v
		}
	}
	add(askedAnnotations, kai)
	return out
}

// decodePod reads the review's pod, refusing reviews of anything else. It
// decodes the object in one pass, as the API server's JSON serializer does
// (sigs.k8s.io/json: case-sensitive names, integers kept as integers),
// without the universal deserializer's first pass over the whole object to
// find its kind, which was a third of decoding a pod. The type is checked
// after, as that deserializer checked it: an object of another version or
// kind is refused, and one that leaves them out is read as the review's
// v1 Pod (the API server always writes them).
func decodePod(req admission.Request) (*corev1.Pod, error) {
	if req.Kind.Group != "" || req.Kind.Kind != "Pod" {
		return nil, fmt.Errorf("gpuadmit admits pods; this review is for %s", req.Kind.String())
	}
	if len(req.Object.Raw) == 0 {
		return nil, fmt.Errorf("the review carries no pod object")
	}
	if req.Namespace == "" {
		return nil, fmt.Errorf("the review names no namespace; pods are namespaced")
	}
	pod := &corev1.Pod{}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(req.Object.Raw, pod); err != nil {
		return nil, fmt.Errorf("decode pod: %w", err)
	}
	if pod.APIVersion != "" && pod.APIVersion != "v1" || pod.Kind != "" && pod.Kind != "Pod" {
		return nil, fmt.Errorf("decode pod: the review's object has apiVersion %q and kind %q, want v1 Pod", pod.APIVersion, pod.Kind)
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	return pod, nil
}

func podRef(pod *corev1.Pod) klog.ObjectRef {
	name := pod.Name
	if name == "" {
		name = pod.GenerateName
	}
	return klog.ObjectRef{Namespace: pod.Namespace, Name: name}
}
