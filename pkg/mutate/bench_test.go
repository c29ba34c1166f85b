package mutate

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/intent"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/decide"
)

// thousandNodes is a cluster of 1,000 GPU nodes in five pools of every mode.
func thousandNodes() []corev1.Node {
	kinds := []corev1.Node{h100Mixed, h200Mixed, a100Single, t4Shared, a100Whole}
	nodes := make([]corev1.Node, 0, 1000)
	for i := 0; i < 1000; i++ {
		n := *kinds[i%len(kinds)].DeepCopy()
		n.Name = fmt.Sprintf("%s-%04d", n.Name, i)
		nodes = append(nodes, n)
	}
	return nodes
}

// BenchmarkDecide1000Nodes is one admission decision (intent, Rego policy,
// pool choice, mutation, patch) with the default policies over an inventory
// of 1,000 nodes, as the webhook runs it with its informer-built inventory.
func BenchmarkDecide1000Nodes(b *testing.B) { benchDecide(b, defaultEngine) }

// benchPod is the benchmarks' pod: HAMi's 3000 MiB, class inference.
func benchPod() *corev1.Pod {
	p := pod("p", map[string]string{"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"})
	p.Labels = map[string]string{"gpuadmit.io/class": "inference"}
	return p
}

// benchDecide decides benchPod over 1,000 nodes with eval, again and again.
func benchDecide(b *testing.B, eval decide.Evaluator) {
	m := NewMutator(eval, StaticInventory{Inv: inventory.Build(thousandNodes(), allocator.Default())}, MutatorOptions{})
	p := benchPod()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := m.Mutate(ctx, Request{Pod: p})
		if err != nil || !res.Allowed {
			b.Fatalf("allowed %v, err %v: %s", res.Allowed, err, res.Message)
		}
	}
}

// noMemo hides the engine's active set, so every decision runs the policy.
type noMemo struct{ decide.Evaluator }

// BenchmarkDecideFresh1000Nodes is BenchmarkDecide1000Nodes with the policy
// evaluated for every pod: the pods of a template the memo has not seen, or
// pods that are all different.
func BenchmarkDecideFresh1000Nodes(b *testing.B) { benchDecide(b, noMemo{defaultEngine}) }

// BenchmarkMemoHit is the policy step of a decision the memo answers: the
// view, the key's hash and the lookup.
func BenchmarkMemoHit(b *testing.B) {
	inv := inventory.Build(thousandNodes(), allocator.Default())
	m := NewMutator(defaultEngine, StaticInventory{Inv: inv}, MutatorOptions{})
	p := benchPod()
	want, errs := intent.Read(p)
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	pools, err := m.preparedPools(inv)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := m.memo.Evaluate(ctx, m.eval, inv, input(Request{Pod: p}, want, pools)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.memo.Evaluate(ctx, m.eval, inv, input(Request{Pod: p}, want, pools)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReinvoke1000Nodes is the same pod arriving already mutated
// (reinvocation): restore, decide again, compare.
func BenchmarkReinvoke1000Nodes(b *testing.B) {
	m := NewMutator(defaultEngine, StaticInventory{Inv: inventory.Build(thousandNodes(), allocator.Default())}, MutatorOptions{})
	first, err := m.Mutate(context.Background(), Request{Pod: pod("p", map[string]string{"nvidia.com/gpumem": "3000"})})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := m.Mutate(context.Background(), Request{Pod: first.Pod})
		if err != nil || !res.Allowed || len(res.Patch) != 0 {
			b.Fatalf("allowed %v, err %v, patch %v", res.Allowed, err, res.Patch)
		}
	}
}

// BenchmarkHandler is one admission review through the webhook's HTTP
// handler, AdmissionReview bytes in, response bytes out (no TLS), with the
// example cluster and the default policies, for benchstat comparisons.
func BenchmarkHandler(b *testing.B) {
	body, err := os.ReadFile("testdata/reviews/hami-create.json")
	if err != nil {
		b.Fatal(err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	m := NewMutator(defaultEngine, StaticInventory{Inv: exampleInventory(b)}, MutatorOptions{})
	wh := &admission.Webhook{Handler: NewHandler(m, staticNamespace{}, scheme, HandlerOptions{})}
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/mutate-v1-pod", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		wh.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || !bytes.Contains(rec.Body.Bytes(), []byte(`"patchType":"JSONPatch"`)) {
			b.Fatalf("answer %d: %s", rec.Code, rec.Body.String())
		}
	}
}

// staticNamespace answers every namespace with one that has no labels.
type staticNamespace struct{}

func (staticNamespace) Namespace(_ context.Context, name string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	ns.Name = name
	return ns, nil
}
