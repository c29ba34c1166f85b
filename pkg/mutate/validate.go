package mutate

import (
	"context"
	"fmt"
	"net/http"
	"sort"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Validator is the validating webhook for pod UPDATE (/validate-v1-pod): it
// keeps gpuadmit's record trustworthy by denying changes to gpuadmit's own
// annotations, and to a mutated pod's GPU resources, by anyone but gpuadmit.
type Validator struct {
	self    string
	decoder admission.Decoder
	clock   clock.PassiveClock
}

var _ admission.Handler = (*Validator)(nil)

// NewValidator lets only the user named self (gpuadmit's service account) change the record.
func NewValidator(self string, scheme *runtime.Scheme) *Validator {
	return &Validator{self: self, decoder: admission.NewDecoder(scheme), clock: clock.RealClock{}}
}

// Handle answers one review.
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := v.clock.Now()
	resp, outcome := v.handle(req)
	reviews.WithLabelValues("validate", outcome).Inc()
	reviewDuration.WithLabelValues("validate").Observe(v.clock.Since(start).Seconds())
	return resp
}

func (v *Validator) handle(req admission.Request) (admission.Response, string) {
	pod, err := decodePod(v.decoder, req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err), OutcomeErrored
	}
	if req.Operation != admissionv1.Update || (v.self != "" && req.UserInfo.Username == v.self) {
		return admission.Allowed(""), OutcomeAllowed
	}
	old := &corev1.Pod{}
	if len(req.OldObject.Raw) == 0 {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("the UPDATE review carries no old pod")), OutcomeErrored
	}
	if err := v.decoder.DecodeRaw(req.OldObject, old); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode old pod: %w", err)), OutcomeErrored
	}
	if msg := recordChange(old, pod); msg != "" {
		return admission.Denied(msg), OutcomeDenied
	}
	return admission.Allowed(""), OutcomeAllowed
}

// recordChange says what an update changes of gpuadmit's record, or "".
func recordChange(old, pod *corev1.Pod) string {
	for _, k := range ownKeys(old, pod) {
		was, had := old.Annotations[k]
		is, has := pod.Annotations[k]
		if had != has || was != is { // an added empty value is a change too
			return fmt.Sprintf("metadata.annotations[%s]: gpuadmit's decision record cannot be added, changed or removed after admission (only gpuadmit may); leave it as it was", k)
		}
	}
	if _, mutated := old.Annotations[AnnotationDecision]; !mutated {
		return ""
	}
	if path := gpuResourceChange(old, pod); path != "" {
		return fmt.Sprintf("%s: the GPU resources gpuadmit decided for this pod cannot be changed; create a new pod with the request you need", path)
	}
	return ""
}

func ownKeys(pods ...*corev1.Pod) []string {
	seen := map[string]bool{}
	for _, p := range pods {
		for k := range p.Annotations {
			if IsOwnAnnotation(k) {
				seen[k] = true
			}
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// gpuResourceChange returns the path of the first container whose GPU resources differ.
func gpuResourceChange(old, pod *corev1.Pod) string {
	lists := []struct {
		name     string
		old, new []corev1.Container
	}{{"spec.initContainers", old.Spec.InitContainers, pod.Spec.InitContainers}, {"spec.containers", old.Spec.Containers, pod.Spec.Containers}}
	for _, l := range lists {
		if len(l.old) != len(l.new) {
			return l.name
		}
		for i := range l.old {
			if !equality.Semantic.DeepEqual(originalGPU(&l.old[i]), originalGPU(&l.new[i])) {
				return fmt.Sprintf("%s[%d].resources", l.name, i)
			}
		}
	}
	return ""
}
