package policy

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"
	corev1 "k8s.io/api/core/v1"
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
		"a spec field":              {rules: `x := object.get(input.pod.spec, "schedulerName", "")`, want: PodReads{Partial: true, Spec: some("schedulerName")}},
		"a spec field's own fields": {rules: `x := input.pod.spec.affinity.nodeAffinity`, want: PodReads{Partial: true, Spec: some("affinity")}},
		"spec fields by index":      {rules: `x := [r | r := input.pod.spec.containers[_].resources]`, want: PodReads{Partial: true, Spec: some("containers")}},
		"the spec whole":            {rules: `x := input.pod.spec`, want: PodReads{Partial: true, Spec: KeysRead{All: true}}},
		"a spec key computed":       {rules: `x := input.pod.spec[concat("", ["a", "b"])]`, want: PodReads{Partial: true, Spec: KeysRead{All: true}}},
		"object.get of the spec, variable key": {rules: `x := object.get(input.pod.spec, y, "")` + "\ny := \"a\"",
			want: PodReads{Partial: true, Spec: KeysRead{All: true}}},
		// Every other way to reach the spec's fields reads all of them, or all of the pod.
		"the spec's fields enumerated": {rules: `x contains k if some k, _ in input.pod.spec`, want: PodReads{Partial: true, Spec: KeysRead{All: true}}},
		"the spec's keys":              {rules: `x := object.keys(input.pod.spec)`, want: PodReads{Partial: true, Spec: KeysRead{All: true}}},
		"the spec in a variable":       {rules: "x := a if {\n\ts := input.pod.spec\n\ta := s.affinity\n}", want: PodReads{Partial: true, Spec: KeysRead{All: true}}},
		"the spec passed to a function": {rules: `x := f(input.pod.spec)` + "\nf(s) := s.affinity",
			want: PodReads{Partial: true, Spec: KeysRead{All: true}}},
		"the spec as a with value": {rules: "x := v if {\n\tv := data.q.affinity with data.q as input.pod.spec\n}",
			want: PodReads{Partial: true, Spec: KeysRead{All: true}}},
		"object.get of the pod, a spec key path": {rules: `x := object.get(input.pod, ["spec", "affinity"], {})`,
			want: PodReads{Partial: true, Spec: some("affinity")}},
		"an alias of the spec":      {rules: "import input.pod.spec as s\nx := s.affinity", want: PodReads{}},
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
			got := readsOf(map[string]*ast.Module{"p.rego": m, "p_test.rego": tests}).pod
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestDefaultSetReads: the embedded policies read three fields of the
// spec (not its affinity or tolerations) and one annotation of the pod,
// and none of its labels.
func TestDefaultSetReads(t *testing.T) {
	set, err := Compile(t.Context(), Embedded())
	if err != nil {
		t.Fatal(err)
	}
	want := PodReads{Partial: true, Spec: KeysRead{Names: map[string]bool{"nodeSelector": true, "priorityClassName": true, "schedulerName": true}},
		Annotations: KeysRead{Names: map[string]bool{"gpuadmit.io/backend": true}}}
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
	r = PodReads{Partial: true, Spec: KeysRead{All: true}, Metadata: true}
	if diff := cmp.Diff(v, r.KeyView(v)); diff != "" {
		t.Errorf("metadata and spec read: (-want +got)\n%s", diff)
	}
	if got := (PodReads{}).KeyView(v); got != v {
		t.Errorf("the zero PodReads: got a copy, want the view itself")
	}
}

// TestKeyViewSpecFields: of the spec, the key keeps the fields read and
// only those, so pods that differ in a field no rule reads (a DaemonSet
// pod's node affinity) key alike, and pods that differ in one read do not.
func TestKeyViewSpecFields(t *testing.T) {
	pod := func(node string) *PodView {
		return &PodView{Spec: PodSpecView{
			SchedulerName: "s", Containers: []ContainerView{{Name: "c"}},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
					{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}},
		}}
	}
	a, b := pod("n1"), pod("n2")
	r := PodReads{Partial: true, Spec: KeysRead{Names: map[string]bool{"schedulerName": true, "containers": true, "hostname": true}}}
	want := &PodView{Spec: PodSpecView{SchedulerName: "s", Containers: a.Spec.Containers}}
	if diff := cmp.Diff(want, r.KeyView(a)); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if diff := cmp.Diff(r.KeyView(a), r.KeyView(b)); diff != "" {
		t.Errorf("pods that differ only in affinity, not read: keys differ (-a +b)\n%s", diff)
	}
	r.Spec.Names["affinity"] = true
	if cmp.Equal(r.KeyView(a), r.KeyView(b)) {
		t.Errorf("affinity read: pods on two nodes key alike")
	}
}

// TestSpecFieldsNameEveryField: every field of the spec's view can be kept
// by the name a policy reads it by; a field left out of specFields would
// drop out of every key, and pods that differ in it would share a decision.
func TestSpecFieldsNameEveryField(t *testing.T) {
	v := reflect.ValueOf(PodSpecView{})
	if len(specFields) != v.NumField() {
		t.Fatalf("specFields has %d names for the view's %d fields", len(specFields), v.NumField())
	}
	all := &PodView{Spec: fullSpecView()}
	names := KeysRead{Names: map[string]bool{}}
	for name := range specFields {
		if name == "" || name == "-" {
			t.Errorf("a field with no JSON name: %q", name)
		}
		names.Names[name] = true
	}
	got := PodReads{Partial: true, Spec: names}.KeyView(all)
	if diff := cmp.Diff(all, got); diff != "" {
		t.Errorf("every field named: (-want +got)\n%s", diff)
	}
}

// fullSpecView sets every field of PodSpecView to a value other than its zero.
func fullSpecView() PodSpecView {
	var s PodSpecView
	v := reflect.ValueOf(&s).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("x")
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		case reflect.Map:
			f.Set(reflect.MakeMap(f.Type()))
			f.SetMapIndex(reflect.New(f.Type().Key()).Elem(), reflect.New(f.Type().Elem()).Elem())
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		default:
			panic("fullSpecView: set " + f.Type().String())
		}
	}
	return s
}
