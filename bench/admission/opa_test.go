package admission

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// TestOPAPolicyMatchesGpuadmit: for every pod shape of the benchmark, as the
// API server sends it (requests defaulted from limits, the default
// tolerations, the resolved priority), OPA's policy answers with a patch
// that gives the pod the same mutation as gpuadmit's default decision on the
// same nodes, and admits the mutated pod unchanged when reinvoked.
func TestOPAPolicyMatchesGpuadmit(t *testing.T) {
	ctx := context.Background()
	nodes := Nodes(1000)
	ns := corev1.Namespace{}
	ns.Name = "bench"
	engine := policy.NewEngine(policy.Options{})
	if _, err := engine.Load(ctx, policy.Embedded()); err != nil {
		t.Fatal(err)
	}
	m := mutate.NewMutator(engine, mutate.StaticInventory{Inv: inventory.Build(nodes, allocator.Default())})
	review := preparedOPA(t, nodes, ns)
	for i := range shapes {
		t.Run(fmt.Sprint(shapes[i].gpu), func(t *testing.T) {
			p := admitted(Pod("bench", fmt.Sprintf("p-%d", i), i))
			res, err := m.Mutate(ctx, mutate.Request{Pod: p, Namespace: &ns, Operation: "CREATE"})
			if err != nil || !res.Allowed {
				t.Fatalf("gpuadmit: allowed %v, err %v: %s", res.Allowed, err, res.Message)
			}
			got, patched := review(t, p)
			if !patched {
				t.Fatal("OPA answered without a patch")
			}
			if d := MutationOf(res.Pod).Diff(MutationOf(got)); d != "" {
				t.Errorf("gpuadmit vs OPA: %s", d)
			}
			if _, again := review(t, got); again {
				t.Error("OPA patched the pod it had already mutated")
			}
		})
	}
}

// admitted is the pod as defaulting and the built-in admission plugins leave it for the webhook.
func admitted(p *corev1.Pod) *corev1.Pod {
	p = p.DeepCopy()
	for i := range p.Spec.Containers {
		p.Spec.Containers[i].Resources.Requests = p.Spec.Containers[i].Resources.Limits.DeepCopy()
	}
	secs := int64(300)
	for _, k := range []string{"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"} {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: k, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs})
	}
	zero := int32(0)
	never := corev1.PreemptLowerPriority
	p.Spec.Priority, p.Spec.PreemptionPolicy = &zero, &never
	return p
}

// preparedOPA evaluates the benchmark policy in process, with the cluster
// data pushed as the benchmark pushes it, and returns a function that sends
// a pod through it and applies the answer's patch.
func preparedOPA(t *testing.T, nodes []corev1.Node, ns corev1.Namespace) func(*testing.T, *corev1.Pod) (*corev1.Pod, bool) {
	t.Helper()
	data, err := ClusterData(nodes, []corev1.Namespace{ns})
	if err != nil {
		t.Fatal(err)
	}
	q, err := rego.New(
		rego.Query("data.gpuadmit.admission.review"),
		rego.Module("admission.rego", string(opaPolicy)),
		rego.Store(inmem.NewFromObject(map[string]any{"cluster": data})),
	).PrepareForEval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return func(t *testing.T, p *corev1.Pod) (*corev1.Pod, bool) {
		t.Helper()
		raw, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		_ = json.Unmarshal(raw, &obj)
		in := map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": map[string]any{
			"uid": "u-1", "operation": "CREATE", "namespace": p.Namespace, "object": obj,
		}}
		rs, err := q.Eval(context.Background(), rego.EvalInput(in))
		if err != nil || len(rs) != 1 {
			t.Fatalf("evaluate: %v (%d results)", err, len(rs))
		}
		var out struct {
			Response struct {
				UID     string `json:"uid"`
				Allowed bool   `json:"allowed"`
				Patch   string `json:"patch"`
			} `json:"response"`
		}
		if err := roundTrip(rs[0].Expressions[0].Value, &out); err != nil {
			t.Fatal(err)
		}
		if !out.Response.Allowed || out.Response.UID != "u-1" {
			t.Fatalf("answer %+v, want allowed with uid u-1", out.Response)
		}
		if out.Response.Patch == "" {
			return p, false
		}
		ops, err := base64.StdEncoding.DecodeString(out.Response.Patch)
		if err != nil {
			t.Fatal(err)
		}
		patch, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			t.Fatalf("decode patch %s: %v", ops, err)
		}
		mutated, err := patch.Apply(raw)
		if err != nil {
			t.Fatalf("apply patch %s: %v", ops, err)
		}
		got := &corev1.Pod{}
		if err := json.Unmarshal(mutated, got); err != nil {
			t.Fatal(err)
		}
		return got, true
	}
}
