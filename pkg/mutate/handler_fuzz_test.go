package mutate

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpuadmit/gpuadmit/pkg/intent"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

// FuzzHandler sends arbitrary request bodies through the webhook: it never
// panics, and answers with an AdmissionReview, never with gpuadmit's own
// failure (a 5xx) for what is the client's fault.
func FuzzHandler(f *testing.F) {
	wh := fuzzWebhook(f)
	for _, body := range reviewFiles(f) {
		f.Add(body)
	}
	f.Add([]byte(`{"request":{"uid":"x","kind":{"kind":"Pod","version":"v1"},"operation":"CREATE","object":{}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, body []byte) {
		checkAnswer(t, serve(wh, "application/json", body))
	})
}

// FuzzPodInReview puts arbitrary pods into a well-formed CREATE review.
func FuzzPodInReview(f *testing.F) {
	wh := fuzzWebhook(f)
	files := reviewFiles(f)
	for _, body := range files {
		if obj := requestOf(f, body).Object.Raw; len(obj) > 0 {
			f.Add(obj)
		}
	}
	f.Add([]byte(`{"metadata":{"annotations":{"gpu-fraction":"1e9"}},"spec":{"containers":[{"name":"a"}]}}`))
	f.Add([]byte(`{"spec":{"initContainers":[{"name":"i","resources":{"limits":{"nvidia.com/gpu":"-1"}}}]}}`))
	var review map[string]any
	if err := json.Unmarshal(files["hami-create"], &review); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, pod []byte) {
		if !json.Valid(pod) {
			pod, _ = json.Marshal(string(pod)) // still a well-formed review, with a string for a pod
		}
		review["request"].(map[string]any)["object"] = json.RawMessage(pod)
		body, err := json.Marshal(review)
		if err != nil {
			t.Fatal(err)
		}
		got := checkAnswer(t, serve(wh, "application/json", body))
		if got.UID != "7f3c1a52-0001-4b7e-9c1d-2e5a7b9c0d01" {
			t.Errorf("response uid %q, want the request's", got.UID)
		}
	})
}

// FuzzGPUPodInReview admits pods that ask for GPU in fuzzed resources,
// quantities and annotations: every dialect, parsed, decided and applied.
func FuzzGPUPodInReview(f *testing.F) {
	wh := fuzzWebhook(f)
	f.Add("nvidia.com/gpu", "1", "nvidia.com/gpumem", "3000", "gpu-memory", "2000")
	f.Add("gpuadmit.io/gpu", "500m", "gpuadmit.io/gpu-memory", "10Gi", "gpuadmit.io/class", "training")
	f.Add("nvidia.com/gpu", "2", "nvidia.com/gpucores", "30", "gpu-fraction", "0.5")
	f.Add("aliyun.com/gpu-mem", "4", "cpu", "1", "gpuadmit.io/backend", "mig")
	f.Add("volcano.sh/vgpu-number", "1", "volcano.sh/vgpu-memory", "16000", "gpuadmit.io/model", "H200-141GB")
	f.Add("nvidia.com/mig-1g.18gb", "1", "nvidia.com/gpumem-percentage", "50", "gpu-fraction-num-devices", "2")
	f.Add("nvidia.com/gpu.shared", "2", "nvidia.com/gpu", "1", "gpuadmit.io/backend", "time-sliced")
	f.Add("nvidia.com/gpu.shared", "1", "gpuadmit.io/gpu-memory", "8Gi", "nvidia.com/vgpu-mode", "mig")
	addNameSeeds(f)
	var review map[string]any
	if err := json.Unmarshal(reviewFiles(f)["hami-create"], &review); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, res1, q1, res2, q2, key, value string) {
		pod := corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: "fuzz", Namespace: "team-a", Annotations: map[string]string{key: value, "gpu-fraction-container-name": "a"}},
		}
		pod.Spec.Containers = []corev1.Container{{Name: "a", Image: "x"}, {Name: "b", Image: "x"}}
		for i, r := range [][2]string{{res1, q1}, {res2, q2}} {
			q, err := resource.ParseQuantity(r[1])
			if err != nil || r[0] == "" {
				continue
			}
			pod.Spec.Containers[i].Resources.Limits = corev1.ResourceList{corev1.ResourceName(r[0]): q}
		}
		obj, err := json.Marshal(pod)
		if err != nil {
			t.Skip()
		}
		review["request"].(map[string]any)["object"] = json.RawMessage(obj)
		body, err := json.Marshal(review)
		if err != nil {
			t.Fatal(err)
		}
		r := checkAnswer(t, serve(wh, "application/json", body))
		if r.Allowed {
			checkNoImplicitClass(t, patched(t, obj, r.Patch))
		}
	})
}

// addNameSeeds seeds FuzzGPUPodInReview with every resource and annotation
// name the webhook knows, the implicit DeviceClass names of gpuadmit's
// classes and another driver's among them: each resource beside
// nvidia.com/gpu, each annotation on a pod asking for one GPU.
func addNameSeeds(f *testing.F) {
	resources := append(intent.Resources(), intent.DeviceClassResources()...)
	resources = append(resources, intent.ResourceMIGPrefix+"1g.10gb",
		intent.ResourceDeviceClassPrefix+"mig-1g.10gb.gpuadmit.io", intent.ResourceDeviceClassPrefix+"mig-3g.40gb.gpuadmit.io",
		intent.ResourceDeviceClassPrefix+"x.gpuadmit.io", intent.ResourceDeviceClassPrefix+"fpga.example.com",
		inventory.ResourceMemoryMiB, corev1.ResourceName(inventory.ModelResource("H100-80GB")))
	for _, r := range resources {
		f.Add(string(r), "1", "nvidia.com/gpu", "1", "gpuadmit.io/class", "training")
	}
	for _, k := range []string{intent.AnnotationClass, intent.AnnotationBackend, intent.AnnotationModel,
		intent.AnnotationKAIFraction, intent.AnnotationKAIMemory, intent.AnnotationKAINumDevices, intent.AnnotationKAIContainerName,
		intent.AnnotationHAMiUseType, intent.AnnotationHAMiNoUseType, intent.AnnotationHAMiMode, intent.AnnotationVolcanoMode,
		intent.AnnotationHAMiUseUUID, intent.AnnotationHAMiNoUseUUID, intent.AnnotationVolcanoUseUUID, intent.AnnotationVolcanoNoUseUUID,
		intent.AnnotationHAMiGPUPolicy, intent.AnnotationHAMiNodePolicy, intent.AnnotationHAMiNUMABind, intent.AnnotationVolcanoPodGroupPolicy,
		record.AnnotationDecision, record.AnnotationRequest, record.AnnotationWritten, record.AnnotationMAC} {
		f.Add(intent.ResourceDeviceClassPrefix+intent.DeviceClassGPU, "1", "", "", k, "1")
	}
}

// checkNoImplicitClass fails when an admitted pod still asks for one of
// gpuadmit's DeviceClasses by its implicit name: the scheduler would turn
// it into a claim outside the policy and the accounting.
func checkNoImplicitClass(t *testing.T, raw []byte) {
	t.Helper()
	var p corev1.Pod
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("decode the admitted pod: %v", err)
	}
	for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
		for _, l := range []corev1.ResourceList{c.Resources.Limits, c.Resources.Requests} {
			for k := range l {
				if intent.IsDeviceClassResource(k) {
					t.Errorf("admitted with container %q still asking %s", c.Name, k)
				}
			}
		}
	}
}

// fuzzWebhook lets panics through, so that the fuzzer sees them. Every
// namespace exists: looking one up is not what is fuzzed.
func fuzzWebhook(f *testing.F) *admission.Webhook {
	m := NewMutator(defaultEngine, StaticInventory{Inv: exampleInventory(f)}, MutatorOptions{})
	h := NewHandler(m, anyNamespace{known: teamA(f)}, podScheme(), HandlerOptions{Recorder: &fakeRecorder{}})
	return &admission.Webhook{Handler: h, RecoverPanic: new(false)}
}

// anyNamespace has every namespace, those it knows with their labels.
type anyNamespace struct{ known fakeNamespaces }

func (a anyNamespace) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	if ns, err := a.known.Namespace(ctx, name); err == nil {
		return ns, nil
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, nil
}

// checkAnswer requires an AdmissionReview with a response that is not a 5xx.
func checkAnswer(t *testing.T, w interface {
	Result() *http.Response
}) *admissionv1.AdmissionResponse {
	t.Helper()
	resp := w.Result()
	if resp.StatusCode != http.StatusOK {
		if resp.StatusCode < 400 || resp.StatusCode >= 500 {
			t.Fatalf("HTTP %d, want 200 or a 4xx", resp.StatusCode)
		}
		return &admissionv1.AdmissionResponse{}
	}
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&review); err != nil || review.Response == nil {
		t.Fatalf("the answer is not an AdmissionReview with a response: %v", err)
	}
	r := review.Response
	if r.Result == nil || r.Result.Code >= 500 {
		t.Fatalf("status %+v, want no 5xx for a client's review", r.Result)
	}
	if r.Allowed && r.Result.Code != http.StatusOK {
		t.Errorf("allowed with status code %d", r.Result.Code)
	}
	if len(r.Patch) > 0 && !bytes.HasPrefix(r.Patch, []byte("[")) {
		t.Errorf("patch %q is not a JSON patch", r.Patch)
	}
	return r
}

// serve answers one review through wh without a network.
func serve(wh *admission.Webhook, contentType string, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, mutatePath, bytes.NewReader(body))
	r.Header.Set("Content-Type", contentType)
	w := httptest.NewRecorder()
	wh.ServeHTTP(w, r)
	return w
}

// reviewFiles reads testdata/reviews/*.json (not the golden files), by name.
func reviewFiles(t testing.TB) map[string][]byte {
	t.Helper()
	paths, _ := filepath.Glob("testdata/reviews/*.json")
	out := map[string][]byte{}
	for _, p := range paths {
		if strings.HasSuffix(p, ".golden.json") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(p), ".json")] = b
	}
	return out
}

func requestOf(t testing.TB, body []byte) admission.Request {
	t.Helper()
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		t.Fatalf("not an AdmissionReview request: %v", err)
	}
	return admission.Request{AdmissionRequest: *review.Request}
}
