package mutate

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	jsonpatchapply "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpuadmit/gpuadmit/certs"
	"github.com/gpuadmit/gpuadmit/internal/listener"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/decide"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

const mutatePath = "/mutate-v1-pod"

// reviewGolden is what testdata/reviews/<name>.golden.json records of the
// webhook's answer to <name>.json.
type reviewGolden struct {
	UID       string                `json:"uid"`
	Allowed   bool                  `json:"allowed"`
	Code      int32                 `json:"code"`
	Message   string                `json:"message,omitempty"`
	PatchType string                `json:"patchType,omitempty"`
	Patch     []jsonpatch.Operation `json:"patch,omitempty"`
	Warnings  []string              `json:"warnings,omitempty"`
	Events    []string              `json:"events"`
}

// TestHandlerOverTLS posts every AdmissionReview in testdata/reviews to the
// handler served by controller-runtime's webhook server over TLS, and
// compares the answers with their golden files.
func TestHandlerOverTLS(t *testing.T) {
	rec := &fakeRecorder{}
	url, client := serveTLS(t, map[string]admission.Handler{mutatePath: exampleHandler(t, rec)})
	want := map[string]struct {
		allowed bool
		code    int32
		events  int
	}{
		"hami-create":        {allowed: true, code: 200, events: 1},
		"native-fraction":    {allowed: true, code: 200, events: 1},
		"kai-fraction":       {allowed: true, code: 200, events: 1},
		"no-gpu":             {allowed: true, code: 200},
		"invalid-percentage": {code: 403, events: 1}, // a denial is explained too
		"forged-decision":    {code: 403, events: 1},
		"already-mutated":    {allowed: true, code: 200, events: 0}, // decided before: no second Event
		"update":             {allowed: true, code: 200},
		"dry-run":            {allowed: true, code: 200},
	}
	files := reviewFiles(t)
	if len(files) != len(want) {
		t.Errorf("testdata/reviews holds %d reviews, the test expects %d", len(files), len(want))
	}
	for name, w := range want {
		t.Run(name, func(t *testing.T) {
			body := files[name]
			seen := rec.count()
			status, review := post(t, client, url+mutatePath, "application/json", body)
			if status != http.StatusOK || review.Response == nil {
				t.Fatalf("HTTP %d, response %v; want 200 with an AdmissionReview response", status, review.Response)
			}
			got := goldenOf(review.Response, rec.since(seen))
			compareGolden(t, filepath.Join("testdata/reviews", name+".golden.json"), got)
			if got.Allowed != w.allowed || got.Code != w.code || len(got.Events) != w.events {
				t.Errorf("allowed %v, code %d, %d events; want %v, %d, %d", got.Allowed, got.Code, len(got.Events), w.allowed, w.code, w.events)
			}
			if in := requestOf(t, body); string(review.Response.UID) != string(in.UID) {
				t.Errorf("response uid %q, want the request's %q", review.Response.UID, in.UID)
			}
			if len(review.Response.Patch) > 0 {
				checkReviewPatchApplies(t, body, review.Response.Patch)
			}
		})
	}
}

func goldenOf(r *admissionv1.AdmissionResponse, events []string) reviewGolden {
	g := reviewGolden{UID: string(r.UID), Allowed: r.Allowed, Warnings: r.Warnings, Events: events}
	if r.Result != nil {
		g.Code, g.Message = r.Result.Code, r.Result.Message
	}
	if r.PatchType != nil {
		g.PatchType = string(*r.PatchType)
	}
	if len(r.Patch) > 0 {
		if err := json.Unmarshal(r.Patch, &g.Patch); err != nil {
			g.Message += fmt.Sprintf(" [patch is not a JSON patch: %v]", err)
		}
	}
	return g
}

// checkReviewPatchApplies applies the answer's patch to the review's object.
func checkReviewPatchApplies(t *testing.T, body, patch []byte) {
	t.Helper()
	p, err := jsonpatchapply.DecodePatch(patch)
	if err != nil {
		t.Fatalf("decode patch: %v", err)
	}
	out, err := p.Apply(requestOf(t, body).Object.Raw)
	if err != nil {
		t.Fatalf("the patch does not apply to the review's pod: %v", err)
	}
	if err := json.Unmarshal(out, &corev1.Pod{}); err != nil {
		t.Errorf("the patched pod is not a pod: %v", err)
	}
}

// TestHandlerRejectsBadInput sends what a broken or hostile client might:
// each gets a 400-class answer, never a 5xx and never a hang.
func TestHandlerRejectsBadInput(t *testing.T) {
	url, client := serveTLS(t, map[string]admission.Handler{mutatePath: exampleHandler(t, nil)})
	hami := reviewFiles(t)["hami-create"]
	tests := map[string]struct {
		contentType string
		body        []byte
		wantCode    int32
	}{
		"body is not JSON":        {body: []byte(`{"request": {`), wantCode: 400},
		"empty body":              {body: nil, wantCode: 400},
		"wrong content type":      {contentType: "text/plain", body: hami, wantCode: 400},
		"body over the 7 MiB cap": {body: append(bytes.Repeat([]byte(" "), 7<<20), hami...), wantCode: 413},
		"a Deployment review":     {body: editRequest(t, hami, `{"kind":{"group":"apps","version":"v1","kind":"Deployment"}}`), wantCode: 400},
		"no object":               {body: editRequest(t, hami, `{"object":null}`), wantCode: 400},
		"object is not a pod":     {body: editRequest(t, hami, `{"object":{"kind":"Pod","spec":"x"}}`), wantCode: 400},
		"object is a string":      {body: editRequest(t, hami, `{"object":"pod"}`), wantCode: 400},
		"object is a Service":     {body: editRequest(t, hami, `{"object":{"kind":"Service"}}`), wantCode: 400},
		"object of another group": {body: editRequest(t, hami, `{"object":{"apiVersion":"example.com/v1"}}`), wantCode: 400},
		"no namespace":            {body: editRequest(t, hami, `{"namespace":null,"object":{"metadata":{"namespace":null}}}`), wantCode: 400},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			ct := tt.contentType
			if ct == "" {
				ct = "application/json"
			}
			status, review := post(t, client, url+mutatePath, ct, tt.body)
			if status != http.StatusOK {
				if status < 400 || status >= 500 {
					t.Fatalf("HTTP %d, want 200 with an AdmissionReview, or a 4xx", status)
				}
				return
			}
			r := review.Response
			if r == nil || r.Allowed || r.Result == nil || r.Result.Code != tt.wantCode {
				t.Fatalf("response %+v, want allowed false with status code %d", r, tt.wantCode)
			}
		})
	}
}

// TestDecodePod: the review's object is decoded as the API server's JSON
// serializer decodes it (field names are case-sensitive); an object of
// another version or kind is refused with what it is, and one without
// them is the review's v1 Pod, as the universal deserializer read it.
func TestDecodePod(t *testing.T) {
	req := func(obj string) admission.Request {
		r := admission.Request{}
		r.Kind = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
		r.Namespace = "ns"
		r.Object.Raw = []byte(obj)
		return r
	}
	pod, err := decodePod(req(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"Spec":{"nodeName":"n"},"spec":{"schedulerName":"s"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if pod.Name != "p" || pod.Namespace != "ns" || pod.Spec.SchedulerName != "s" || pod.Spec.NodeName != "" {
		t.Errorf("decoded %s/%s, schedulerName %q, nodeName %q: want p in the review's namespace ns, s, and no nodeName (\"Spec\" is not \"spec\")",
			pod.Namespace, pod.Name, pod.Spec.SchedulerName, pod.Spec.NodeName)
	}
	for _, obj := range []string{`{"metadata":{"name":"p"}}`, `{"kind":"Pod"}`, `{"apiVersion":"v1"}`} {
		if _, err := decodePod(req(obj)); err != nil {
			t.Errorf("%s: %v, want it read as the review's v1 Pod", obj, err)
		}
	}
	for obj, want := range map[string]string{
		`{"apiVersion":"v1","kind":"Service"}`:                       `apiVersion "v1" and kind "Service", want v1 Pod`,
		`{"kind":"Service"}`:                                         `apiVersion "" and kind "Service", want v1 Pod`,
		`{"apiVersion":"example.com/v1","kind":"Pod"}`:               `apiVersion "example.com/v1" and kind "Pod", want v1 Pod`,
		`{"apiVersion":"v1","kind":"Pod","spec":{"containers":"x"}}`: "decode pod: json: cannot unmarshal",
	} {
		if _, err := decodePod(req(obj)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want one saying %q", obj, err, want)
		}
	}
}

// editRequest merges patch (a JSON merge patch) into the review's request.
func editRequest(t testing.TB, body []byte, patch string) []byte {
	t.Helper()
	out, err := jsonpatchapply.MergePatch(body, []byte(`{"request":`+patch+`}`))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// failingEvaluator fails every evaluation with err.
type failingEvaluator struct{ err error }

func (f failingEvaluator) Evaluate(context.Context, policy.Input) (policy.Decision, error) {
	return policy.Decision{}, f.err
}

// TestEvaluationErrorsAreErrors checks that gpuadmit's own failure to decide
// is answered as an error (500, counted as errored), never as an allow.
func TestEvaluationErrorsAreErrors(t *testing.T) {
	tests := map[string]struct {
		eval    decide.Evaluator
		wantMsg string
	}{
		"evaluator returns a deadline":             {eval: failingEvaluator{err: fmt.Errorf("evaluate: %w", context.DeadlineExceeded)}, wantMsg: "deadline exceeded"},
		"a policy that burns CPU past its timeout": {eval: burningEngine(t), wantMsg: "(budget 20ms)"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			h := NewHandler(NewMutator(tt.eval, StaticInventory{Inv: exampleInventory(t)}, MutatorOptions{}), teamA(t), podScheme(), HandlerOptions{})
			before := reviewCount(t, "mutate", OutcomeErrored)
			req := requestOf(t, reviewFiles(t)["hami-create"])
			done := make(chan admission.Response, 1)
			go func() { done <- h.Handle(context.Background(), req) }()
			var resp admission.Response
			select {
			case resp = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("no answer after 30s: the evaluation timeout did not stop the policy")
			}
			if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusInternalServerError {
				t.Fatalf("response %+v, want allowed false with status code 500", resp.AdmissionResponse)
			}
			if !strings.Contains(resp.Result.Message, tt.wantMsg) {
				t.Errorf("message %q, want it to say %q", resp.Result.Message, tt.wantMsg)
			}
			if got := reviewCount(t, "mutate", OutcomeErrored) - before; got != 1 {
				t.Errorf("errored reviews went up by %v, want 1", got)
			}
		})
	}
}

// TestReplicasAnswerAlike runs two replicas, each with its own engine loaded
// from the same set and its own inventory built from the same nodes: every
// review gets byte-identical answers, again and again.
func TestReplicasAnswerAlike(t *testing.T) {
	replica := func() *admission.Webhook {
		e := newEngine(t)
		m := NewMutator(e, StaticInventory{Inv: exampleInventory(t)}, MutatorOptions{})
		return &admission.Webhook{Handler: NewHandler(m, teamA(t), podScheme(), HandlerOptions{})}
	}
	a, b := replica(), replica()
	for name, body := range reviewFiles(t) {
		for i := range 3 {
			ga, gb := serve(a, "application/json", body), serve(b, "application/json", body)
			if diff := cmp.Diff(ga.Body.String(), gb.Body.String()); diff != "" {
				t.Errorf("%s, round %d: replicas answer differently (-a +b):\n%s", name, i, diff)
			}
		}
	}
}

// burningEngine has a 20ms budget and a decision rule that takes far longer;
// its own test does not touch the decision, so it loads.
func burningEngine(t testing.TB) *policy.Engine {
	t.Helper()
	e := policy.NewEngine(policy.Options{EvalTimeout: 20 * time.Millisecond})
	set := fstest.MapFS{
		"decision.rego": {Data: []byte(`package gpuadmit

burn := count([x | some x in numbers.range(1, 50000000); x % 7 == 0])

decision := {"deny": [], "warnings": [], "placement": {}} if burn > 0
`)},
		"decision_test.rego": {Data: []byte("package gpuadmit_test\n\ntest_loads if true\n")},
	}
	if _, err := e.Load(context.Background(), policy.Source{FS: set, Name: "burning"}); err != nil {
		t.Fatal(err)
	}
	return e
}

// newEngine loads the embedded set into an engine of its own.
func newEngine(t testing.TB) *policy.Engine {
	t.Helper()
	e := policy.NewEngine(policy.Options{})
	if _, err := e.Load(context.Background(), policy.Embedded()); err != nil {
		t.Fatal(err)
	}
	return e
}

// serveTLS serves handlers with controller-runtime's webhook server over TLS
// on 127.0.0.1, and returns its base URL and a client that trusts its CA.
func serveTLS(t *testing.T, handlers map[string]admission.Handler) (string, *http.Client) {
	t.Helper()
	b, err := certs.Generate(certs.Options{IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(b.Cert, b.Key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.CACert)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	// controller-runtime's server binds the port it is given itself, so
	// one taken since it was chosen (tests run side by side) is chosen again.
	port, err := listener.Retry("127.0.0.1", 3, func(port int) error {
		srv := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, TLSOpts: []func(*tls.Config){func(c *tls.Config) {
			c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &pair, nil }
		}}})
		for path, h := range handlers {
			srv.Register(path, &admission.Webhook{Handler: h})
		}
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan error, 1)
		go func() { stopped <- srv.Start(ctx) }()
		if err := waitServing(client, fmt.Sprintf("https://127.0.0.1:%d", port), stopped); err != nil {
			cancel()
			return err
		}
		t.Cleanup(func() { cancel(); <-stopped })
		return nil
	})
	if err != nil {
		t.Fatalf("webhook server: %v", err)
	}
	return fmt.Sprintf("https://127.0.0.1:%d", port), client
}

// waitServing polls url until the server answers, for at most ten seconds;
// the server's error if it stops first.
func waitServing(client *http.Client, url string, stopped chan error) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := client.Get(url + "/")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case err := <-stopped:
			stopped <- err // for the caller's cleanup, which waits on it
			return fmt.Errorf("stopped: %w", err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not answering after 10s: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func post(t testing.TB, client *http.Client, url, contentType string, body []byte) (int, admissionv1.AdmissionReview) {
	t.Helper()
	resp, err := client.Post(url, contentType, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var review admissionv1.AdmissionReview
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&review); err != nil {
			t.Fatalf("the answer is not an AdmissionReview: %v", err)
		}
	}
	return resp.StatusCode, review
}

func exampleHandler(t testing.TB, rec Recorder) *Handler {
	m := NewMutator(defaultEngine, StaticInventory{Inv: exampleInventory(t)}, MutatorOptions{})
	return NewHandler(m, teamA(t), podScheme(), HandlerOptions{Recorder: rec})
}

func podScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(s))
	return s
}

// fakeNamespaces knows only the namespaces it holds.
type fakeNamespaces map[string]*corev1.Namespace

func (f fakeNamespaces) Namespace(_ context.Context, name string) (*corev1.Namespace, error) {
	if ns, ok := f[name]; ok {
		return ns, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("namespaces"), name)
}

// teamA knows examples/namespace.yaml's namespace.
func teamA(t testing.TB) fakeNamespaces {
	ns := &corev1.Namespace{}
	readYAML(t, "../../examples/namespace.yaml", ns)
	return fakeNamespaces{ns.Name: ns}
}

// fakeRecorder keeps one line per Event.
type fakeRecorder struct {
	mu     sync.Mutex
	events []string
}

func (r *fakeRecorder) Decision(pod *corev1.Pod, res Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf("%s/%s allowed=%v", pod.Namespace, podRef(pod).Name, res.Allowed))
}

func (r *fakeRecorder) count() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.events) }

func (r *fakeRecorder) since(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string{}, r.events[n:]...)
}

// reviewCount reads gpuadmit_webhook_reviews_total{webhook, outcome}.
func reviewCount(t testing.TB, webhook, outcome string) float64 {
	t.Helper()
	var m dto.Metric
	if err := reviews.WithLabelValues(webhook, outcome).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
