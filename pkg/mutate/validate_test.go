package mutate

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

const selfUser = "system:serviceaccount:gpuadmit-system:gpuadmit-webhook"

// TestValidatorGuardsTheRecord checks who may change what of a pod
// gpuadmit decided for, on UPDATE.
func TestValidatorGuardsTheRecord(t *testing.T) {
	mutated := mutatedPod(t)
	plain := pod("plain", map[string]string{"nvidia.com/gpu": "1"})
	tests := map[string]struct {
		op       admissionv1.Operation
		user     string
		old, new *corev1.Pod // old nil: the review carries no oldObject
		wantCode int32
		wantMsg  string
	}{
		"changing the decision is denied": {
			old: mutated, new: withAnnotation(mutated, AnnotationDecision, "infer: 8 GPUs"),
			wantCode: 403, wantMsg: "metadata.annotations[gpuadmit.io/decision]",
		},
		"adding a decision to a pod gpuadmit did not decide is denied": {
			old: plain, new: withAnnotation(plain, AnnotationDecision, "a: 1 GPU"),
			wantCode: 403, wantMsg: "metadata.annotations[gpuadmit.io/decision]",
		},
		"adding an empty decision is denied": {
			old: plain, new: withAnnotation(plain, AnnotationDecision, ""),
			wantCode: 403, wantMsg: "metadata.annotations[gpuadmit.io/decision]",
		},
		"removing the request record is denied": {
			old: mutated, new: withoutAnnotation(mutated, AnnotationRequest),
			wantCode: 403, wantMsg: "metadata.annotations[gpuadmit.io/request]",
		},
		"changing the request record is denied": {
			old: mutated, new: withAnnotation(mutated, AnnotationRequest, `{"infer":{"limits":{"nvidia.com/gpu":"8"}}}`),
			wantCode: 403, wantMsg: "metadata.annotations[gpuadmit.io/request]",
		},
		"adding another gpuadmit.io/ key is denied": {
			old: mutated, new: withAnnotation(mutated, "gpuadmit.io/pool", "h200"),
			wantCode: 403, wantMsg: "metadata.annotations[gpuadmit.io/pool]",
		},
		"gpuadmit itself may change its record": {
			user: selfUser, old: mutated, new: withAnnotation(mutated, AnnotationDecision, "rewritten"),
			wantCode: 200,
		},
		"changing a mutated pod's GPU limit is denied": {
			old: mutated, new: withGPULimit(mutated, "nvidia.com/gpu", "2"),
			wantCode: 403, wantMsg: "spec.containers[0].resources",
		},
		"adding a GPU resource to a mutated pod is denied": {
			old: mutated, new: withGPULimit(mutated, "nvidia.com/gpumem", "40000"),
			wantCode: 403, wantMsg: "spec.containers[0].resources",
		},
		"a label change on a mutated pod is allowed": {
			old: mutated, new: withLabel(mutated, "app", "infer"),
			wantCode: 200,
		},
		"changing the class hint is allowed": {
			old: mutated, new: withAnnotation(mutated, "gpuadmit.io/class", "batch"),
			wantCode: 200,
		},
		"CREATE is the mutating webhook's business": {
			op: admissionv1.Create, new: withAnnotation(plain, AnnotationDecision, "forged"),
			wantCode: 200,
		},
		"an UPDATE without the old pod is an error": {
			new: mutated, wantCode: 400, wantMsg: "no old pod",
		},
	}
	v := NewValidator(selfUser, podScheme())
	outcome := map[int32]string{200: OutcomeAllowed, 403: OutcomeDenied, 400: OutcomeErrored}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			op := tt.op
			if op == "" {
				op = admissionv1.Update
			}
			user := tt.user
			if user == "" {
				user = "alice"
			}
			before := reviewCount(t, "validate", outcome[tt.wantCode])
			resp := v.Handle(context.Background(), podReview(t, op, user, tt.old, tt.new))
			if resp.Result == nil {
				t.Fatalf("response without a status: %+v", resp.AdmissionResponse)
			}
			if got := resp.Result.Code; got != tt.wantCode || resp.Allowed != (tt.wantCode == http.StatusOK) {
				t.Errorf("allowed %v, code %d (%s); want code %d", resp.Allowed, got, resp.Result.Message, tt.wantCode)
			}
			if !strings.Contains(resp.Result.Message, tt.wantMsg) {
				t.Errorf("message %q, want it to name %q", resp.Result.Message, tt.wantMsg)
			}
			if got := reviewCount(t, "validate", outcome[tt.wantCode]) - before; got != 1 {
				t.Errorf("validate reviews with outcome %s went up by %v, want 1", outcome[tt.wantCode], got)
			}
		})
	}
}

// mutatedPod is the HAMi example as gpuadmit admitted it (testdata/golden).
func mutatedPod(t testing.TB) *corev1.Pod {
	t.Helper()
	var g golden
	readYAML(t, "testdata/golden/hami-memory.json", &g)
	if g.Pod == nil || g.Pod.Annotations[AnnotationDecision] == "" {
		t.Fatal("testdata/golden/hami-memory.json holds no mutated pod")
	}
	return g.Pod
}

func podReview(t testing.TB, op admissionv1.Operation, user string, old, pod *corev1.Pod) admission.Request {
	t.Helper()
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       "validate",
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Name:      pod.Name,
		Namespace: pod.Namespace,
		Operation: op,
		UserInfo:  authenticationv1.UserInfo{Username: user},
		Object:    raw(t, pod),
	}}
	if old != nil {
		req.OldObject = raw(t, old)
	}
	return req
}

func raw(t testing.TB, pod *corev1.Pod) runtime.RawExtension {
	t.Helper()
	b, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: b}
}

func withAnnotation(p *corev1.Pod, k, v string) *corev1.Pod {
	out := p.DeepCopy()
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[k] = v
	return out
}

func withoutAnnotation(p *corev1.Pod, k string) *corev1.Pod {
	out := p.DeepCopy()
	delete(out.Annotations, k)
	return out
}

func withLabel(p *corev1.Pod, k, v string) *corev1.Pod {
	out := p.DeepCopy()
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	out.Labels[k] = v
	return out
}

// withGPULimit sets a limit (and the equal request) of the first container.
func withGPULimit(p *corev1.Pod, name, q string) *corev1.Pod {
	out := p.DeepCopy()
	r := &out.Spec.Containers[0].Resources
	for _, l := range []*corev1.ResourceList{&r.Limits, &r.Requests} {
		if *l == nil {
			*l = corev1.ResourceList{}
		}
		(*l)[corev1.ResourceName(name)] = resource.MustParse(q)
	}
	return out
}
