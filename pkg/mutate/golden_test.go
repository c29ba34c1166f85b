package mutate

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	jsonpatchapply "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the current output")

// golden is what a golden file records for one example pod.
type golden struct {
	Allowed     bool                  `json:"allowed"`
	Message     string                `json:"message"`
	Warnings    []string              `json:"warnings"`
	Patch       []jsonpatch.Operation `json:"patch"`
	Pod         *corev1.Pod           `json:"pod"`
	Explanation string                `json:"explanation"`
}

// TestGoldenExamples decides every example pod (examples/pods, shown in
// docs/dialects.md) against the example cluster and the default policies,
// compares with testdata/golden, checks that the patch really turns the pod
// into the result, and that deciding again on the result changes nothing
// (reinvocation, re-applying a saved pod).
func TestGoldenExamples(t *testing.T) {
	eachExample(t, func(t *testing.T, m *Mutator, ns *corev1.Namespace, name string, in *corev1.Pod, res Result) {
		got := golden{res.Allowed, res.Message, res.Warnings, res.Patch, res.Pod, res.Explanation}
		compareGolden(t, filepath.Join("testdata/golden", name+".json"), got)
		if !res.Allowed {
			return
		}
		checkPatchApplies(t, in, res)
		again, err := m.Mutate(context.Background(), Request{Pod: res.Pod, Namespace: ns})
		if err != nil || !again.Allowed || len(again.Patch) != 0 {
			t.Errorf("deciding again on the mutated pod: allowed %v, patch %v, err %v, message %q; want allowed with an empty patch", again.Allowed, again.Patch, err, again.Message)
		}
	})
}

// eachExample decides every example pod (examples/pods, shown in
// docs/dialects.md) against the example cluster and the default policies, in
// a subtest of its own, and hands the result to check with the mutator, the
// namespace and the pod as it arrived.
func eachExample(t *testing.T, check func(t *testing.T, m *Mutator, ns *corev1.Namespace, name string, in *corev1.Pod, res Result)) {
	t.Helper()
	files, _ := filepath.Glob("../../examples/pods/*.yaml")
	if len(files) < 8 {
		t.Fatalf("found %d example pods, want every dialect", len(files))
	}
	ns := &corev1.Namespace{}
	readYAML(t, "../../examples/namespace.yaml", ns)
	m := NewMutator(defaultEngine, StaticInventory{Inv: exampleInventory(t)}, MutatorOptions{})
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			in := &corev1.Pod{}
			readYAML(t, f, in)
			res, err := m.Mutate(context.Background(), Request{Pod: in, Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			check(t, m, ns, name, in, res)
		})
	}
}

var revisionHash = regexp.MustCompile(`revision sha256-[0-9a-f]+`)

// compareGolden compares got, as indented JSON, with the golden file (rewritten with -update).
func compareGolden(t *testing.T, path string, got any) {
	t.Helper()
	b, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	// The embedded policy set's revision is a hash of its files: a golden
	// file records the decision, not which edit of the policies made it.
	b = revisionHash.ReplaceAll(b, []byte("revision sha256-<embedded>"))
	if *update {
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./pkg/mutate -update to create it)", err)
	}
	if diff := cmp.Diff(strings.TrimSpace(string(want)), string(b)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

// checkPatchApplies applies the RFC 6902 patch with an independent
// implementation and compares with the mutated pod.
func checkPatchApplies(t *testing.T, in *corev1.Pod, res Result) {
	t.Helper()
	orig, _ := json.Marshal(in)
	ops, _ := json.Marshal(res.Patch)
	patch, err := jsonpatchapply.DecodePatch(ops)
	if err != nil {
		t.Fatalf("decode patch: %v", err)
	}
	patched, err := patch.Apply(orig)
	if err != nil {
		t.Fatalf("apply patch: %v", err)
	}
	var got corev1.Pod
	if err := json.Unmarshal(patched, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(res.Pod, &got); diff != "" {
		t.Errorf("patched pod differs from the mutated pod (-want +got):\n%s", diff)
	}
}
