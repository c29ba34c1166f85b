package offline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/offline"
)

const (
	examples  = "../../examples/"
	nodesFile = examples + "nodes.yaml"
	nsFile    = examples + "namespace.yaml"
)

func opts(pod, output string) offline.MutateOptions {
	return offline.MutateOptions{PodFile: pod, NodesFile: nodesFile, NamespaceFile: nsFile, Output: output}
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// mutateJSON runs Mutate with JSON output and decodes the one result it must print.
func mutateJSON(t *testing.T, o offline.MutateOptions) map[string]any {
	t.Helper()
	outs := mutateAll(t, o)
	if len(outs) != 1 {
		t.Fatalf("got %d results, want 1: %v", len(outs), outs)
	}
	return outs[0]
}

// mutateAll runs Mutate with JSON output and decodes the array it must print, and nothing after it.
func mutateAll(t *testing.T, o offline.MutateOptions) []map[string]any {
	t.Helper()
	o.Output = "json"
	var buf bytes.Buffer
	if err := offline.Mutate(context.Background(), o, &buf); err != nil {
		t.Fatalf("Mutate: %v", err)
	}
	dec := json.NewDecoder(&buf)
	var out []map[string]any
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("decode output: %v\n%s", err, buf.String())
	}
	var more any
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		t.Fatalf("output holds more than one JSON value: next decode gave %v, %v", more, err)
	}
	return out
}

func TestMutateJSON(t *testing.T) {
	dir := t.TempDir()
	cpuPod := writeFile(t, dir, "cpu.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: cpu, namespace: team-a}\nspec:\n  containers:\n  - {name: c, image: busybox}\n")
	tests := map[string]struct {
		pod          string
		wantPatch    bool
		wantWarnings bool
	}{
		"a HAMi memory pod is mutated":    {pod: examples + "pods/hami-memory.yaml", wantPatch: true, wantWarnings: true},
		"a pod without GPU is left alone": {pod: cpuPod},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out := mutateJSON(t, opts(tc.pod, "json"))
			keys := slices.Sorted(func(yield func(string) bool) {
				for k := range out {
					if !yield(k) {
						return
					}
				}
			})
			if diff := cmp.Diff([]string{"allowed", "explanation", "kind", "message", "name", "namespace", "patch", "pod", "source", "warnings"}, keys); diff != "" {
				t.Errorf("keys (-want +got):\n%s", diff)
			}
			if out["allowed"] != true {
				t.Errorf("allowed = %v, want true; message %q", out["allowed"], out["message"])
			}
			checkArray(t, out, "patch", tc.wantPatch)
			checkArray(t, out, "warnings", tc.wantWarnings)
			pod, _ := out["pod"].(map[string]any)
			if _, ok := pod["status"]; ok {
				t.Errorf("pod has a status: %v", pod["status"])
			}
			if md, _ := pod["metadata"].(map[string]any); md == nil || md["creationTimestamp"] != nil || md["name"] == nil {
				t.Errorf("pod metadata = %v, want a name and no creationTimestamp", md)
			} else if _, ok := md["creationTimestamp"]; ok {
				t.Errorf("pod metadata has a creationTimestamp key")
			}
		})
	}
}

// checkArray checks that out[key] is a JSON array (never null), empty or not as wanted.
func checkArray(t *testing.T, out map[string]any, key string, nonEmpty bool) {
	t.Helper()
	a, ok := out[key].([]any)
	if !ok {
		t.Errorf("%s = %#v, want an array", key, out[key])
		return
	}
	if (len(a) > 0) != nonEmpty {
		t.Errorf("%s = %v, want non-empty: %v", key, a, nonEmpty)
	}
}

func TestMutateDenied(t *testing.T) {
	tests := map[string]struct {
		pod  string
		want []string // the message names each
	}{
		"too big":     {pod: "too-big.yaml", want: []string{`"train"`, "gpuadmit.io/gpu-memory"}},
		"contradicts": {pod: "invalid.yaml", want: []string{"spec.containers[0]", "gpuadmit.io/gpu", "spec.containers[1]", "nvidia.com/gpumem-percentage"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out := mutateJSON(t, opts(examples+"pods/"+tc.pod, "json"))
			if out["allowed"] != false {
				t.Fatalf("allowed = %v, want false", out["allowed"])
			}
			msg, _ := out["message"].(string)
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not name %q", msg, w)
				}
			}
			checkArray(t, out, "patch", false)
		})
	}
}

func TestMutateErrors(t *testing.T) {
	dir := t.TempDir()
	deployment := writeFile(t, dir, "deploy.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n")
	broken := filepath.Join(dir, "policies")
	if err := os.Mkdir(broken, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, broken, "decision.rego", "package gpuadmit\ndecision := {\n")
	writeFile(t, broken, "decision_test.rego", "package gpuadmit_test\ntest_x if { true }\n")
	hami := examples + "pods/hami-memory.yaml"
	tests := map[string]struct {
		opts offline.MutateOptions
		want string // the error says it
	}{
		"a missing pod file":              {opts: opts(filepath.Join(dir, "nope.yaml"), "json"), want: "nope.yaml"},
		"a missing nodes file":            {opts: offline.MutateOptions{PodFile: hami, NodesFile: filepath.Join(dir, "nodes.yaml")}, want: "nodes.yaml"},
		"a Deployment without a template": {opts: opts(deployment, "json"), want: "no pod template at spec.template"},
		"an unknown output format":        {opts: opts(hami, "xml"), want: "xml"},
		"a broken policy set":             {opts: offline.MutateOptions{PodFile: hami, NodesFile: nodesFile, PoliciesDir: broken}, want: broken},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			err := offline.Mutate(context.Background(), tc.opts, &buf)
			if err == nil {
				t.Fatalf("Mutate succeeded, want an error; output:\n%s", buf.String())
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if buf.Len() > 0 {
				t.Errorf("Mutate failed but wrote:\n%s", buf.String())
			}
		})
	}
}

func TestMutateYAML(t *testing.T) {
	hami := examples + "pods/hami-memory.yaml"
	var buf bytes.Buffer
	if err := offline.Mutate(context.Background(), opts(hami, ""), &buf); err != nil {
		t.Fatalf("Mutate: %v", err)
	}
	text := buf.String()
	if !strings.HasPrefix(text, "# gpuadmit: allowed") {
		t.Fatalf("output does not start with %q:\n%s", "# gpuadmit: allowed", text)
	}
	lines := strings.SplitAfter(text, "\n")
	i := 0
	for i < len(lines) && strings.HasPrefix(lines[i], "#") {
		i++
	}
	if i < 2 {
		t.Errorf("output has %d comment lines, want the verdict and an explanation", i)
	}
	var got corev1.Pod
	if err := yaml.UnmarshalStrict([]byte(strings.Join(lines[i:], "")), &got); err != nil {
		t.Fatalf("the output after the comments is not a pod: %v\n%s", err, text)
	}
	podJSON, err := json.Marshal(mutateJSON(t, opts(hami, "json"))["pod"])
	if err != nil {
		t.Fatal(err)
	}
	var want corev1.Pod
	if err := json.Unmarshal(podJSON, &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("YAML pod differs from the JSON output's pod (-want +got):\n%s", diff)
	}
}

func TestMutateYAMLDenied(t *testing.T) {
	var buf bytes.Buffer
	if err := offline.Mutate(context.Background(), opts(examples+"pods/too-big.yaml", "yaml"), &buf); err != nil {
		t.Fatalf("Mutate: %v", err)
	}
	text := buf.String()
	if !strings.HasPrefix(text, "# gpuadmit: denied") {
		t.Errorf("output does not start with %q:\n%s", "# gpuadmit: denied", text)
	}
	if !strings.Contains(text, `"train"`) {
		t.Errorf("the comments do not say which container was denied:\n%s", text)
	}
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if !strings.HasPrefix(line, "#") {
			t.Errorf("a denied pod printed a line that is not a comment: %q", line)
		}
	}
}

func TestTestEmbedded(t *testing.T) {
	var buf bytes.Buffer
	if err := offline.Test(context.Background(), "", &buf); err != nil {
		t.Fatalf("Test: %v\n%s", err, buf.String())
	}
	if !regexp.MustCompile(`(?m)^\d+ passed, 0 failed$`).MatchString(buf.String()) {
		t.Errorf("no %q line in:\n%s", "N passed, 0 failed", buf.String())
	}
	if strings.Contains(buf.String(), "FAIL") {
		t.Errorf("a test failed:\n%s", buf.String())
	}
}

func TestTestFailingSet(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "decision.rego", "package gpuadmit\ndecision := {\"deny\": []}\n")
	writeFile(t, dir, "decision_test.rego", "package gpuadmit_test\n\nimport data.gpuadmit\n\n"+
		"test_no_deny if { count(gpuadmit.decision.deny) == 0 }\n\n"+
		"test_denies if { count(gpuadmit.decision.deny) == 1 }\n")
	var buf bytes.Buffer
	err := offline.Test(context.Background(), dir, &buf)
	if err == nil {
		t.Fatalf("Test succeeded on a set whose test fails:\n%s", buf.String())
	}
	out := buf.String()
	if !regexp.MustCompile(`(?m)^FAIL .*test_denies`).MatchString(out) {
		t.Errorf("no FAIL line for test_denies in:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^1 passed, 1 failed$`).MatchString(out) {
		t.Errorf("no %q line in:\n%s", "1 passed, 1 failed", out)
	}
}

// TestTestRefusesASandboxedBuiltin: gpuadmit test refuses a set that
// calls a builtin policies may not use, naming it, the rule and the line.
func TestTestRefusesASandboxedBuiltin(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "decision.rego", "package gpuadmit\n\ndecision := {\"deny\": [], \"warnings\": [w]} if {\n"+
		"\tw := http.send({\"method\": \"get\", \"url\": \"http://example.invalid\"}).raw_body\n}\n")
	writeFile(t, dir, "decision_test.rego", "package gpuadmit_test\n\ntest_decides if data.gpuadmit.decision\n")
	var buf bytes.Buffer
	err := offline.Test(context.Background(), dir, &buf)
	if err == nil {
		t.Fatalf("Test succeeded on a set that calls http.send:\n%s", buf.String())
	}
	want := "http.send in rule data.gpuadmit.decision at " + filepath.Join(dir, "decision.rego") + ":4"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("Test: err = %v, want it to name %q", err, want)
	}
}

func TestCatalogTable(t *testing.T) {
	var buf bytes.Buffer
	if err := offline.Catalog(&buf, "table"); err != nil {
		t.Fatalf("Catalog: %v", err)
	}
	for _, want := range []string{"H100-80GB", "1g.10gb", "9984"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table has no %q:\n%s", want, buf.String())
		}
	}
}

func TestCatalogJSON(t *testing.T) {
	var buf bytes.Buffer
	if err := offline.Catalog(&buf, "json"); err != nil {
		t.Fatalf("Catalog: %v", err)
	}
	var models []allocator.Model
	if err := json.Unmarshal(buf.Bytes(), &models); err != nil {
		t.Fatalf("decode: %v", err)
	}
	i := slices.IndexFunc(models, func(m allocator.Model) bool { return m.Name == "H200-141GB" })
	if i < 0 {
		t.Fatalf("no H200-141GB among %d models", len(models))
	}
	if diff := cmp.Diff(allocator.Default().Models(), models); diff != "" {
		t.Errorf("models (-want +got):\n%s", diff)
	}
}

func TestCatalogUnknownFormat(t *testing.T) {
	if err := offline.Catalog(io.Discard, "xml"); err == nil {
		t.Error("Catalog(xml) succeeded, want an error")
	}
}

// TestTestRefusesInvalidQuotas: gpuadmit test applies the same rule as the
// webhook, so a quotas.yaml that could not be enforced fails here first.
func TestTestRefusesInvalidQuotas(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "decision.rego", "package gpuadmit\ndecision := {\"deny\": []}\n")
	writeFile(t, dir, "decision_test.rego", "package gpuadmit_test\n\nimport data.gpuadmit\n\ntest_ok if { count(gpuadmit.decision.deny) == 0 }\n")
	writeFile(t, dir, "quotas.yaml", "gpuadmit:\n  quotas:\n  - {namespaces: [a], gpuMemory: lots}\n")
	var buf bytes.Buffer
	err := offline.Test(context.Background(), dir, &buf)
	if err == nil || !strings.Contains(err.Error(), "gpuMemory") {
		t.Errorf("err = %v, want the invalid gpuMemory named", err)
	}
}

// TestMutateRefusesInvalidQuotas: `gpuadmit mutate --policies DIR` refuses
// a set whose quotas.yaml the webhook would refuse, rather than deciding
// with a set that could never go live.
func TestMutateRefusesInvalidQuotas(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"decision.rego", "placement.rego", "quota.rego", "decision_test.rego", "data.yaml"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "policies", f))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, dir, f, string(raw))
	}
	writeFile(t, dir, "quotas.yaml", "gpuadmit:\n  quotas:\n  - {namespaces: [a], gpuMemory: lots}\n")
	var buf bytes.Buffer
	err := offline.Mutate(context.Background(), offline.MutateOptions{PodFile: examples + "pods/hami-memory.yaml", NodesFile: nodesFile, PoliciesDir: dir}, &buf)
	if err == nil || !strings.Contains(err.Error(), "gpuMemory") {
		t.Errorf("err = %v, want the invalid gpuMemory named; output:\n%s", err, buf.String())
	}
}

func TestMutateSeveralPods(t *testing.T) {
	dir := t.TempDir()
	pod, _ := os.ReadFile("../../examples/pods/hami-memory.yaml")
	f := writeFile(t, dir, "two.yaml", string(pod)+"---\n"+string(pod))
	if outs := mutateAll(t, offline.MutateOptions{PodFile: f, NodesFile: nodesFile}); len(outs) != 2 {
		t.Errorf("got %d results for two pods, want 2", len(outs))
	}
	one := writeFile(t, dir, "one.yaml", "# a comment\n---\n"+string(pod))
	if outs := mutateAll(t, offline.MutateOptions{PodFile: one, NodesFile: nodesFile}); len(outs) != 1 {
		t.Errorf("a pod after a comment-only document: got %d results, want 1", len(outs))
	}
}
