package write

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/gpuadmit/gpuadmit/pkg/mutate/internal/podtest"
)

// examples are the example pods (docs/dialects.md) gpuadmit admits with a
// patch: each as it arrives (examples/pods) and as gpuadmit admits it (the
// handler's golden files, testdata/golden).
func examples(t testing.TB) map[string][2]*corev1.Pod {
	t.Helper()
	files, _ := filepath.Glob("../../../examples/pods/*.yaml")
	if len(files) < 8 {
		t.Fatalf("found %d example pods, want every dialect", len(files))
	}
	out := map[string][2]*corev1.Pod{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		in := &corev1.Pod{}
		readFile(t, f, in)
		var golden struct {
			Allowed bool              `json:"allowed"`
			Patch   []json.RawMessage `json:"patch"`
			Pod     *corev1.Pod       `json:"pod"`
		}
		b, err := os.ReadFile(filepath.Join("../testdata/golden", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &golden); err != nil {
			t.Fatalf("golden %s: %v", name, err)
		}
		if golden.Allowed && len(golden.Patch) > 0 {
			out[name] = [2]*corev1.Pod{in, golden.Pod}
		}
	}
	return out
}

// readFile reads a YAML file into into, strictly.
func readFile(t testing.TB, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWrittenPatchIsThePodPatch: for every example pod gpuadmit admits,
// the patch from the fields gpuadmit writes is taken (nothing else
// differs) and is the patch from the two pods whole, operation for
// operation.
func TestWrittenPatchIsThePodPatch(t *testing.T) {
	pairs := examples(t)
	if len(pairs) < 5 {
		t.Errorf("only %d examples admitted with a patch; the test proves little", len(pairs))
	}
	for name, pair := range pairs {
		t.Run(name, func(t *testing.T) {
			in, out := pair[0], pair[1]
			got, ok, err := writtenPatch(in, out)
			if err != nil || !ok {
				t.Fatalf("writtenPatch: ok %v, err %v; want the written fields' patch", ok, err)
			}
			want, err := podPatch(in, out)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("patch (-whole pods +written fields):\n%s", diff)
			}
		})
	}
}

// TestDiffComparesWholePodsWhenMoreDiffers: a change outside the fields
// gpuadmit writes (a host network, a container more) is not lost: diff
// falls back to the whole pods and the patch carries it.
func TestDiffComparesWholePodsWhenMoreDiffers(t *testing.T) {
	a := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "x"}}}}
	for name, change := range map[string]func(*corev1.Pod){
		"host network":    func(p *corev1.Pod) { p.Spec.HostNetwork = true },
		"container image": func(p *corev1.Pod) { p.Spec.Containers[0].Image = "y" },
		"container more":  func(p *corev1.Pod) { p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "side"}) },
	} {
		t.Run(name, func(t *testing.T) {
			b := a.DeepCopy()
			b.Labels = map[string]string{"gpuadmit.io/managed": "true"}
			change(b)
			if _, ok, _ := writtenPatch(a, b); ok {
				t.Fatal("writtenPatch took a change outside the written fields")
			}
			got, err := Patch(a, b)
			if err != nil {
				t.Fatal(err)
			}
			want, err := podPatch(a, b)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" || len(got) < 2 {
				t.Errorf("patch %v (-whole pods +diff):\n%s", got, diff)
			}
		})
	}
}

// BenchmarkDiff is the patch of a decided pod of a Deployment-like spec
// (probes, 20 environment variables, volumes, a sidecar): from the
// written fields (Patch) and from the pods whole (podPatch).
func BenchmarkDiff(b *testing.B) {
	pair := examples(b)["hami-memory"]
	in, out := podtest.DeploymentLike(pair[0]), podtest.DeploymentLike(pair[1])
	for name, f := range map[string]func(a, b *corev1.Pod) ([]jsonpatch.Operation, error){"written": Patch, "whole": podPatch} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f(in, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The patch memo gives pods that arrive alike, decided alike, the same
// patch, a copy each caller may change; other bytes are not found.
func TestPatchMemo(t *testing.T) {
	m := &patchMemo{}
	a, b := []byte(`{"metadata":{}}`), []byte(`{"metadata":{"labels":{"x":"y"}}}`)
	if _, ok := m.get(a, b); ok {
		t.Fatal("found before put")
	}
	want, err := jsonPatch(a, b)
	if err != nil {
		t.Fatal(err)
	}
	m.put(a, b, want)
	got, ok := m.get(a, []byte(`{"metadata":{"labels":{"x":"z"}}}`))
	if ok {
		t.Fatalf("other bytes found %v", got)
	}
	got, ok = m.get(a, b)
	if !ok || !cmp.Equal(got, want) {
		t.Fatalf("get = %v, %v; want %v", got, ok, want)
	}
	got[0].Path = "/changed"
	if again, _ := m.get(a, b); again[0].Path != want[0].Path {
		t.Errorf("a caller's change reached the memo: %v", again)
	}
}

// TestPatchMemoFoldsLabelsLeftAlone: pods of one template that differ only
// in a label gpuadmit leaves alone (a framework's per-pod index) get the
// patch their whole pods give, from one patch memo entry.
func TestPatchMemoFoldsLabelsLeftAlone(t *testing.T) {
	old := patches
	patches = &patchMemo{}
	defer func() { patches = old }()
	pair := examples(t)["hami-memory"]
	for i := range 5 {
		in, out := pair[0].DeepCopy(), pair[1].DeepCopy()
		for _, p := range []*corev1.Pod{in, out} {
			p.Name = fmt.Sprintf("p-%d", i)
			setEntry(&p.Labels, "example.com/index", fmt.Sprint(i))
			setEntry(&p.Annotations, "example.com/run", fmt.Sprint(i))
		}
		got, err := Patch(in, out)
		if err != nil {
			t.Fatal(err)
		}
		want, err := podPatch(in, out)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("pod %d: patch (-whole pods +memo):\n%s", i, diff)
		}
	}
	if patches.n != 1 {
		t.Errorf("the patch memo holds %d entries for pods that differ only in labels and annotations left alone, want 1", patches.n)
	}
}

func setEntry(m *map[string]string, k, v string) {
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[k] = v
}

// TestUnchangedAsOneKeepsThePatch: folding the keys two maps hold alike
// changes no operation of the patch between them.
func TestUnchangedAsOneKeepsThePatch(t *testing.T) {
	for name, tc := range map[string]struct{ a, b map[string]string }{
		"a key added":           {a: map[string]string{"x": "1", "y": "2"}, b: map[string]string{"x": "1", "y": "2", "z": "3"}},
		"added to none":         {a: nil, b: map[string]string{"z": "3"}},
		"a value changed":       {a: map[string]string{"x": "1", "y": "2"}, b: map[string]string{"x": "1", "y": "9"}},
		"a key removed":         {a: map[string]string{"x": "1", "y": "2"}, b: map[string]string{"x": "1"}},
		"all removed":           {a: map[string]string{"x": "1"}, b: nil},
		"alike, nothing to do":  {a: map[string]string{"x": "1"}, b: map[string]string{"x": "1"}},
		"none alike":            {a: map[string]string{"x": "1"}, b: map[string]string{"y": "1"}},
		"a key with a slash ~1": {a: map[string]string{"a/b": "1"}, b: map[string]string{"a/b": "1", "c~d": "2"}},
	} {
		t.Run(name, func(t *testing.T) {
			doc := func(m map[string]string) []byte {
				var d writtenDoc
				d.Metadata.Labels = m
				return mustJSON(t, d)
			}
			want, err := jsonPatch(doc(tc.a), doc(tc.b))
			if err != nil {
				t.Fatal(err)
			}
			fa, fb := unchangedAsOne(tc.a, tc.b)
			got, err := jsonPatch(doc(fa), doc(fb))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-whole +folded)\n%s", diff)
			}
		})
	}
}

// TestMarshalPatchIsControllerRuntimes: the patch bytes are the ones
// controller-runtime's Response.Complete makes of the same operations,
// byte for byte: value null kept for add and replace, left out of remove,
// values with their own MarshalJSON (quantities) and characters
// encoding/json escapes included.
func TestMarshalPatchIsControllerRuntimes(t *testing.T) {
	cases := map[string][]jsonpatch.Operation{
		"none": {},
		"every kind of value": {
			{Operation: "add", Path: "/metadata/annotations", Value: map[string]string{"gpuadmit.io/decision": "main: 1 GPU -> <MIG 1g.10gb> & more"}},
			{Operation: "add", Path: "/spec/tolerations/0", Value: corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}},
			{Operation: "replace", Path: "/spec/priority", Value: int32(10000)},
			{Operation: "add", Path: "/spec/containers/0/resources/limits/nvidia.com~1gpu", Value: resource.MustParse("1")},
			{Operation: "add", Path: "/spec/nodeName", Value: nil},
			{Operation: "replace", Path: "/spec/schedulerName", Value: nil},
			{Operation: "remove", Path: "/spec/containers/0/resources/limits/gpuadmit.io~1gpu-memory"},
			{Operation: "add", Path: "/spec/containers/0/resources/requests", Value: map[string]any{"cpu": "1", "nested": []any{1.5, "x", nil}}},
		},
	}
	for name, ops := range cases {
		t.Run(name, func(t *testing.T) {
			want := admission.Patched("", ops...)
			if err := want.Complete(admission.Request{}); err != nil {
				t.Fatal(err)
			}
			got, err := MarshalPatch(ops)
			if err != nil {
				t.Fatal(err)
			}
			if len(ops) == 0 {
				if string(got) != "[]" {
					t.Errorf("no operations: got %s, want []", got)
				}
				return
			}
			if string(got) != string(want.Patch) {
				t.Errorf("patch bytes differ:\n got: %s\nwant: %s", got, want.Patch)
			}
		})
	}
}
