package policy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"
)

func TestReadsOf(t *testing.T) {
	some := func(names ...string) KeysRead {
		k := KeysRead{Names: map[string]bool{}}
		for _, n := range names {
			k.Names[n] = true
		}
		return k
	}
	tests := map[string]struct {
		rules string
		want  PodReads
	}{
		"a constant path": {rules: `x := input.pod.metadata.labels.team`, want: PodReads{Partial: true, Labels: some("team")}},
		"a quoted key": {rules: `x := input.pod.metadata.annotations["gpuadmit.io/backend"]`,
			want: PodReads{Partial: true, Annotations: some("gpuadmit.io/backend")}},
		"object.get with a key path": {rules: `x := object.get(input.pod, ["metadata", "annotations", "a"], "")`,
			want: PodReads{Partial: true, Annotations: some("a")}},
		"object.get nested": {rules: `x := object.get(object.get(input.pod, "metadata", {}), ["labels", "b"], "")`,
			want: PodReads{Partial: true, Labels: some("b")}},
		"a variable key reads every key": {rules: `x contains k if some k, _ in input.pod.metadata.labels`,
			want: PodReads{Partial: true, Labels: KeysRead{All: true}}},
		"a key computed": {rules: `x := input.pod.metadata.labels[concat("", ["a", "b"])]`,
			want: PodReads{Partial: true, Labels: KeysRead{All: true}}},
		"the spec":                  {rules: `x := object.get(input.pod.spec, "schedulerName", "")`, want: PodReads{Partial: true, Spec: true}},
		"metadata whole":            {rules: `x := input.pod.metadata`, want: PodReads{Partial: true, Metadata: true}},
		"a metadata field":          {rules: `x := input.pod.metadata.name`, want: PodReads{Partial: true, Metadata: true}},
		"the pod passed whole":      {rules: `x := f(input.pod)` + "\nf(p) := p", want: PodReads{}},
		"object.get, variable key":  {rules: `x := object.get(input.pod, y, "")` + "\ny := \"a\"", want: PodReads{}},
		"input whole":               {rules: `x := input`, want: PodReads{}},
		"an alias of input":         {rules: "import input.pod\nx := pod.metadata.labels.a", want: PodReads{}},
		"other parts of input":      {rules: `x := input.namespace.labels.team`, want: PodReads{Partial: true}},
		"a ref inside data's":       {rules: `x := data.t[input.pod.metadata.labels.team]`, want: PodReads{Partial: true, Labels: some("team")}},
		"a helper beside the tests": {rules: "test_a if h\nh if input.pod.metadata.labels.c", want: PodReads{Partial: true, Labels: some("c")}},
		"with, its value":           {rules: "x if {\n\ty with data.q as input.pod\n}\ny := 1", want: PodReads{}},
		"a ref head":                {rules: `a.b[input.pod.metadata.labels.k] := 1`, want: PodReads{Partial: true, Labels: some("k")}},
		"object.get with a with": {rules: "x := v if {\n\tobject.get(data.d, \"k\", \"\", v) with data.d as input.pod.metadata.labels\n}",
			want: PodReads{Partial: true, Labels: KeysRead{All: true}}},
		"object.get of the package": {rules: "object.get(x, _, _) := x.metadata.labels.k\nv := object.get(input.pod, \"spec\", {})", want: PodReads{}},
		"object.get replaced": {rules: "v := w if {\n\tw := object.get(input.pod, \"spec\", {}) with object.get as g\n}\ng(x, _, _) := x",
			want: PodReads{}},
		"a test helper a rule calls": {rules: "x if test_h\ntest_h if input.pod.metadata.labels.d", want: PodReads{Partial: true, Labels: some("d")}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := ast.MustParseModuleWithOpts("package p\n"+tc.rules, ast.ParserOptions{RegoVersion: ast.RegoV1})
			// tests replace input (with input as …): not a read of it
			tests := ast.MustParseModuleWithOpts("package p\ntest_x if x with input as {}\ntest_y if x with input.pod as {\"a\": 1}",
				ast.ParserOptions{RegoVersion: ast.RegoV1})
			got := readsOf(map[string]*ast.Module{"p.rego": m, "p_test.rego": tests})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestDefaultSetReads: the embedded policies read the spec and one
// annotation of the pod, and none of its labels.
func TestDefaultSetReads(t *testing.T) {
	set, err := Compile(t.Context(), Embedded())
	if err != nil {
		t.Fatal(err)
	}
	want := PodReads{Partial: true, Spec: true, Annotations: KeysRead{Names: map[string]bool{"gpuadmit.io/backend": true}}}
	if diff := cmp.Diff(want, set.Reads); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func TestKeyView(t *testing.T) {
	v := &PodView{
		Metadata: PodMeta{Namespace: "ns", Labels: map[string]string{"team": "a", "pod": "p-1"}, Annotations: map[string]string{"gpuadmit.io/backend": "mig", "x": "y"}},
		Spec:     PodSpecView{SchedulerName: "s", Containers: []ContainerView{{Name: "c"}}},
	}
	r := PodReads{Partial: true, Labels: KeysRead{Names: map[string]bool{"team": true, "absent": true}}, Annotations: KeysRead{All: true}}
	want := &PodView{Metadata: PodMeta{Labels: map[string]string{"team": "a"}, Annotations: v.Metadata.Annotations}}
	if diff := cmp.Diff(want, r.KeyView(v)); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	r = PodReads{Partial: true, Spec: true, Metadata: true}
	if diff := cmp.Diff(v, r.KeyView(v)); diff != "" {
		t.Errorf("metadata and spec read: (-want +got)\n%s", diff)
	}
	if got := (PodReads{}).KeyView(v); got != v {
		t.Errorf("the zero PodReads: got a copy, want the view itself")
	}
}
