package quota

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

func parseYAML(t *testing.T, doc string) ([]Declaration, error) {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatal(err)
	}
	return Parse(v)
}

func TestHardLimits(t *testing.T) {
	decls, err := parseYAML(t, `
- namespaces: [team-a]
  gpuMemory: 200Gi
  models: {h100-80gb: 80Gi}
  profiles: {1g.10gb: 4, 1g.10gb+me: 1}
  wholeGPUs: 2`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for r, q := range decls[0].Hard() {
		got[string(r)] = q.String()
	}
	want := map[string]string{
		"requests.gpuadmit.io/gpu-memory-mib": "204800",
		"requests.gpuadmit.io/h100-80gb-mib":  "81920",
		"requests.nvidia.com/mig-1g.10gb":     "4",
		"requests.nvidia.com/mig-1g.10gb.me":  "1",
		"requests.nvidia.com/gpu":             "2",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hard (-want +got):\n%s", diff)
	}
}

func TestParseRefusesWhatItCannotEnforce(t *testing.T) {
	tests := map[string]struct{ doc, want string }{
		"no namespaces":        {`[{gpuMemory: 1Gi}]`, "set either namespaces or namespaceSelector"},
		"both selectors":       {`[{namespaces: [a], namespaceSelector: {matchLabels: {x: z}}}]`, "set either"},
		"unknown model":        {`[{namespaces: [a], models: {B300: 1Gi}}]`, "B300"},
		"bad quantity":         {`[{namespaces: [a], gpuMemory: lots}]`, "data.gpuadmit.quotas[0].gpuMemory: Invalid value: \"lots\": a byte quantity"},
		"negative memory":      {`[{namespaces: [a], gpuMemory: -1Gi}]`, "must not be negative"},
		"bad profile":          {`[{namespaces: [a], profiles: {big: 1}}]`, "a MIG profile such as 1g.10gb"},
		"bad selector":         {`[{namespaceSelector: {matchExpressions: [{key: a, operator: Near}]}}]`, "namespaceSelector"},
		"not a list":           {`{namespaces: [a]}`, "data.gpuadmit.quotas"},
		"negative whole count": {`[{namespaces: [a], wholeGPUs: -1}]`, "must not be negative"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := parseYAML(t, tc.doc)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestFirstMatchingDeclarationGoverns(t *testing.T) {
	decls, err := parseYAML(t, `
- namespaces: [team-a]
  gpuMemory: 10Gi
- namespaceSelector: {matchLabels: {tier: batch}}
  gpuMemory: 20Gi`)
	if err != nil {
		t.Fatal(err)
	}
	ns := func(name string, labels map[string]string) *corev1.Namespace {
		n := &corev1.Namespace{}
		n.Name, n.Labels = name, labels
		return n
	}
	tests := map[string]struct {
		ns   *corev1.Namespace
		want string // gpuMemory, "" when none governs
	}{
		"by name":               {ns("team-a", map[string]string{"tier": "batch"}), "10Gi"},
		"by label":              {ns("jobs", map[string]string{"tier": "batch"}), "20Gi"},
		"neither":               {ns("other", nil), ""},
		"label of another tier": {ns("web", map[string]string{"tier": "web"}), ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d, ok := For(decls, tc.ns)
			got := ""
			if ok {
				got = d.GPUMemory.String()
			}
			if got != tc.want {
				t.Errorf("governed by %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAbsentQuotasAreNone(t *testing.T) {
	decls, err := FromData(map[string]any{"gpuadmit": map[string]any{"config": map[string]any{}}})
	if err != nil || decls != nil {
		t.Errorf("FromData without quotas = %v, %v; want none", decls, err)
	}
}

func TestParseNamesTheEntryAndModel(t *testing.T) {
	_, err := parseYAML(t, `[{namespaces: [a]}, {namespaces: [b], models: {H100-80GB: huge}}]`)
	if err == nil || !strings.Contains(err.Error(), "data.gpuadmit.quotas[1].models[H100-80GB]") {
		t.Errorf("err = %v, want the second entry's model named", err)
	}
}
