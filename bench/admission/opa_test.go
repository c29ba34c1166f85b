package admission

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

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
	pcs := basePriorityClasses(t)
	m := mutate.NewMutator(engine, mutate.StaticInventory{Inv: inventory.Build(nodes, allocator.Default())},
		mutate.MutatorOptions{PriorityClasses: classGetter(pcs)})
	review := preparedOPA(t, nodes, ns, pcs)
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
			if res.Pod.Spec.PriorityClassName == "" || res.Pod.Spec.Priority == nil {
				t.Errorf("gpuadmit set priorityClassName %q, priority %v: want a class and its resolved priority", res.Pod.Spec.PriorityClassName, res.Pod.Spec.Priority)
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

// basePriorityClasses are the PriorityClasses the benchmark creates (deploy/base).
func basePriorityClasses(t *testing.T) []schedulingv1.PriorityClass {
	t.Helper()
	f, err := os.Open("../../deploy/base/priorityclasses.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []schedulingv1.PriorityClass
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var pc schedulingv1.PriorityClass
		if err := dec.Decode(&pc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		out = append(out, pc)
	}
	if len(out) == 0 {
		t.Fatal("no PriorityClass in deploy/base/priorityclasses.yaml")
	}
	return out
}

// classGetter resolves PriorityClasses from a fixed list, as the webhook's cache would.
type classGetter []schedulingv1.PriorityClass

func (g classGetter) PriorityClass(_ context.Context, name string) (*schedulingv1.PriorityClass, bool, error) {
	for i := range g {
		if g[i].Name == name {
			return &g[i], true, nil
		}
	}
	return nil, false, nil
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
func preparedOPA(t *testing.T, nodes []corev1.Node, ns corev1.Namespace, pcs []schedulingv1.PriorityClass) func(*testing.T, *corev1.Pod) (*corev1.Pod, bool) {
	t.Helper()
	data, err := ClusterData(nodes, []corev1.Namespace{ns}, pcs)
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
