package mutate

import (
	"context"
	"encoding/json"
	"testing"

	"gomodules.xyz/jsonpatch/v2"
	jsonpatchv4 "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/mutate/internal/podtest"
)

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// BenchmarkAPIServerAppliesPatch is the API server's part of a mutating
// webhook's patch for a Deployment-like pod: json-patch v4's Apply, which
// its mutating webhook dispatcher runs on the pod's JSON. gpuadmit's patch
// against the admission benchmark's "patch" configuration (one annotation
// added): a patch that reaches into spec makes Apply decode and encode
// the spec, whatever its number of operations.
func BenchmarkAPIServerAppliesPatch(b *testing.B) {
	in, res := deploymentLikePod(b)
	ja := mustJSON(b, in)
	// the pod has no annotations: the patch configuration adds the map
	annotation := []jsonpatch.Operation{{Operation: "add", Path: "/metadata/annotations", Value: map[string]string{"bench.gpuadmit.io/patched": "true"}}}
	for name, ops := range map[string][]jsonpatch.Operation{"gpuadmit": res.Patch, "one-annotation": annotation} {
		b.Run(name, func(b *testing.B) {
			p, err := jsonpatchv4.DecodePatch(mustJSON(b, ops))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Apply(ja); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// deploymentLikePod is hami-memory.yaml with what a Deployment's pods
// carry (probes, 20 environment variables, volumes, a sidecar), and its
// decision.
func deploymentLikePod(b testing.TB) (*corev1.Pod, Result) {
	p := &corev1.Pod{}
	readYAML(b, "../../examples/pods/hami-memory.yaml", p)
	in := podtest.DeploymentLike(p)
	ns := &corev1.Namespace{}
	readYAML(b, "../../examples/namespace.yaml", ns)
	res, err := NewMutator(defaultEngine, StaticInventory{Inv: exampleInventory(b)}, MutatorOptions{}).Mutate(context.Background(), Request{Pod: in, Namespace: ns})
	if err != nil || !res.Allowed {
		b.Fatalf("allowed %v, err %v: %s", res.Allowed, err, res.Message)
	}
	return in, res
}
