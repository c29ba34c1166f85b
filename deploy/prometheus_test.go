package deploy_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpuadmit/gpuadmit/pkg/usage"
)

const rulesFile = "prometheus/gpuadmit-rules.yaml"

// The rules and alerts pass their promtool unit tests (DCGM series without
// pod labels included). promtool comes from Debian's prometheus package,
// which hack/tools.sh installs; without it the test is skipped, unless
// GPUADMIT_REQUIRE_TOOLS=1.
func TestPrometheusRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("GPUADMIT_REQUIRE_TOOLS") == "1" {
			t.Fatal("promtool not found: run hack/tools.sh (it installs Debian's prometheus package)")
		}
		t.Skip("promtool not found; hack/tools.sh installs it")
	}
	cmd := exec.Command(promtool, "test", "rules", "gpuadmit-rules_test.yaml")
	cmd.Dir = "prometheus"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// Every gpuadmit_ series the rules read is one gpuadmit exports: a renamed
// or misspelt series would leave a rule silently empty, which promtool's
// tests, fed the names the rules use, cannot see.
func TestPrometheusRulesReadExportedSeries(t *testing.T) {
	text, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	exported := exportedSeries()
	// A series name, not part of a recording rule's level:name:operation.
	for _, m := range regexp.MustCompile(`(?:^|[^:a-z_])(gpuadmit_[a-z_]+)`).FindAllStringSubmatch(string(text), -1) {
		if name := m[1]; !slices.Contains(exported, name) {
			t.Errorf("%s reads %s, which gpuadmit does not export (it exports %v)", rulesFile, name, exported)
		}
	}
}

// exportedSeries are the names usage.Describe declares.
func exportedSeries() []string {
	ch := make(chan *prometheus.Desc)
	go func() {
		usage.Describe(ch)
		close(ch)
	}()
	var names []string
	re := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		if m := re.FindStringSubmatch(d.String()); m != nil {
			names = append(names, m[1])
		}
	}
	return names
}

// The chart's copy of the rules is the rules file, byte for byte: Helm
// reads only files inside the chart.
func TestChartRulesAreTheRulesFile(t *testing.T) {
	want, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(chartRulesFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from %s; copy it: cp deploy/%s deploy/%s", chartRulesFile, rulesFile, rulesFile, chartRulesFile)
	}
}

const chartRulesFile = "helm/gpuadmit/files/gpuadmit-rules.yaml"

// With prometheus.rules and prometheus.podMonitor on, the chart renders a
// PrometheusRule whose groups are the rules file's, and a PodMonitor that
// selects the controller's pods on their metrics port. (The strict decoder
// knows no prometheus-operator kinds, so these are read as plain YAML; off,
// the default, the chart renders neither, which TestHelm's strict decoding
// of the default rendering would notice.)
func TestHelmPrometheusObjects(t *testing.T) {
	tl := findTools(t)
	out, err := tl.templateErr(t, "--set", "prometheus.rules.enabled=true", "--set", "prometheus.podMonitor.enabled=true",
		"--set", "prometheus.rules.labels.release=kube-prometheus", "--show-only", "templates/prometheus.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]map[string]any{}
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		if kind, _ := m["kind"].(string); kind != "" {
			docs[kind] = m
		}
	}
	var file map[string]any
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	rule := docs["PrometheusRule"]
	if diff := cmp.Diff(file["groups"], dig(rule, "spec", "groups")); diff != "" {
		t.Errorf("PrometheusRule groups (-rules file +chart):\n%s", diff)
	}
	if got := dig(rule, "metadata", "labels", "release"); got != "kube-prometheus" {
		t.Errorf("PrometheusRule label release = %v, want the value's", got)
	}
	ctrl := get[*appsv1.Deployment](t, tl.template(t), "Deployment", namespace, "gpuadmit-controller")
	pm := docs["PodMonitor"]
	for k, v := range dig(pm, "spec", "selector", "matchLabels").(map[string]any) {
		if ctrl.Spec.Template.Labels[k] != v {
			t.Errorf("PodMonitor selects %s=%v; the controller's pods have %q", k, v, ctrl.Spec.Template.Labels[k])
		}
	}
	port := dig(pm, "spec", "podMetricsEndpoints").([]any)[0].(map[string]any)["port"]
	if !slices.ContainsFunc(ctrl.Spec.Template.Spec.Containers[0].Ports, func(p corev1.ContainerPort) bool { return p.Name == port }) {
		t.Errorf("PodMonitor scrapes port %v, which the controller's container does not name", port)
	}
}

// dig is m's value at path, nil where any step is missing.
func dig(m map[string]any, path ...string) any {
	var v any = m
	for _, k := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}
