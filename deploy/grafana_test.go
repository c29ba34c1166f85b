package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const (
	dashboardFile      = "grafana/gpuadmit.json"
	chartDashboardFile = "helm/gpuadmit/files/gpuadmit-dashboard.json"
)

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

// query is one PromQL expression of the dashboard and where it is.
type query struct{ where, expr string }

// dashboardQueries are the expressions of every panel's targets (rows'
// panels included) and of the query variables' label_values().
func dashboardQueries(t *testing.T) []query {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var qs []query
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				qs = append(qs, query{fmt.Sprintf("panel %q target %s", p.Title, tg.RefID), tg.Expr})
			}
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", dashboardFile, p.Title)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	labelValues := regexp.MustCompile(`^label_values\(([^,]+),\s*[a-zA-Z_]+\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			t.Errorf("%s: variable %s: query %q is not label_values(SERIES, LABEL)", dashboardFile, v.Name, q)
			continue
		}
		qs = append(qs, query{"variable " + v.Name, m[1]})
	}
	return qs
}

// grafanaVars stands in for Grafana's variables where promtool parses.
var grafanaVars = strings.NewReplacer("${pool}", ".*", "$pool", ".*", "${namespace}", ".*", "$namespace", ".*",
	"$__rate_interval", "5m", "$__interval", "1m", "$__range", "1d")

// Every query of the dashboard parses as PromQL: promtool checks a rules
// file with each one, Grafana's variables replaced, as a recording rule.
// promtool 2.42 (Debian 12) has no offline PromQL parser of its own
// (promql format is newer), and the product module takes no dependency on
// Prometheus's parser for a test.
func TestDashboardQueriesParse(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("GPUADMIT_REQUIRE_TOOLS") == "1" {
			t.Fatal("promtool not found: run hack/tools.sh (it installs Debian's prometheus package)")
		}
		t.Skip("promtool not found; hack/tools.sh installs it")
	}
	qs := dashboardQueries(t)
	if len(qs) == 0 {
		t.Fatalf("%s has no queries", dashboardFile)
	}
	for _, q := range qs {
		if strings.Contains(grafanaVars.Replace(q.expr), "$") {
			t.Errorf("%s: %q uses a variable the test does not know; add it to grafanaVars", q.where, q.expr)
		}
	}
	if msg, ok := promtoolParses(t, promtool, qs); !ok {
		// Name the queries that fail one by one: promtool stops at the first.
		for _, q := range qs {
			if msg, ok := promtoolParses(t, promtool, []query{q}); !ok {
				t.Errorf("%s: %q does not parse:\n%s", q.where, q.expr, msg)
			}
		}
		t.Fatalf("promtool check rules:\n%s", msg)
	}
}

// promtoolParses checks a rules file of qs with promtool.
func promtoolParses(t *testing.T, promtool string, qs []query) (string, bool) {
	t.Helper()
	type rule struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var rules []rule
	for i, q := range qs {
		rules = append(rules, rule{fmt.Sprintf("dashboard:query_%d", i), grafanaVars.Replace(q.expr)})
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", f).CombinedOutput()
	return string(out), err == nil
}

// Every series the dashboard reads is one gpuadmit's collector exports
// (usage.Describe) or its rules record (deploy/prometheus): a renamed or
// misspelt series would leave a panel silently empty.
func TestDashboardReadsGpuadmitSeries(t *testing.T) {
	known := append(exportedSeries(), recordedSeries(t)...)
	for _, q := range dashboardQueries(t) {
		names := seriesNames(q.expr)
		if len(names) == 0 {
			t.Errorf("%s: %q names no series", q.where, q.expr)
		}
		for _, n := range names {
			if !slices.Contains(known, n) {
				t.Errorf("%s reads %s, which neither gpuadmit exports nor %s records", q.where, n, rulesFile)
			}
		}
	}
}

// recordedSeries are the names the rules file records.
func recordedSeries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Record string `json:"record"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				names = append(names, r.Record)
			}
		}
	}
	return names
}

var (
	promqlStrings   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promqlMatchers  = regexp.MustCompile(`\{[^}]*\}`)
	promqlRanges    = regexp.MustCompile(`\[[^\]]*\]`)
	promqlGrouping  = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlIdent     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promqlCall      = regexp.MustCompile(`^\s*\(`)
	promqlKeywords  = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset", "inf", "nan", "Inf", "NaN"}
	promqlDurations = regexp.MustCompile(`\b\d+(?:ms|s|m|h|d|w|y)\b`)
)

// seriesNames are the metric names a PromQL expression selects: its
// identifiers less functions and aggregations (followed by a parenthesis),
// keywords, label names of matchers and groupings, and strings.
func seriesNames(expr string) []string {
	s := promqlStrings.ReplaceAllString(expr, " ")
	s = promqlMatchers.ReplaceAllString(s, " ")
	s = promqlRanges.ReplaceAllString(s, " ")
	s = promqlGrouping.ReplaceAllString(s, " ")
	s = promqlDurations.ReplaceAllString(s, " ")
	var names []string
	for _, loc := range promqlIdent.FindAllStringIndex(s, -1) {
		id := s[loc[0]:loc[1]]
		if promqlCall.MatchString(s[loc[1]:]) || slices.Contains(promqlKeywords, id) {
			continue
		}
		if loc[0] > 0 && (s[loc[0]-1] >= '0' && s[loc[0]-1] <= '9' || s[loc[0]-1] == '.') {
			continue // the exponent or tail of a number (1e3)
		}
		if !slices.Contains(names, id) {
			names = append(names, id)
		}
	}
	return names
}

// seriesNames finds what a query selects and nothing else, so the check
// above can fail: a misspelt series is named, a label or function is not.
func TestSeriesNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (pool) (gpuadmit_free_mib{pool=~"a|b"})`:                                           {"gpuadmit_free_mib"},
		`sum(gpuadmt_free_mib) by (pool, model)`:                                                   {"gpuadmt_free_mib"},
		`a / on (model) group_left () b:c:sum > 0.5`:                                               {"a", "b:c:sum"},
		`topk(20, uuid:x{UUID!="GPU-1"}) or vector(0)`:                                             {"uuid:x"},
		`sum_over_time(x[1d:1h]) offset 5m`:                                                        {"x"},
		`clamp_min(DCGM_FI_DEV_FB_USED - ignoring (GPU_I_ID) y, 1e3) and bool z`:                   {"DCGM_FI_DEV_FB_USED", "y", "z"},
		`count(up{job="gpuadmit"} == 1)`:                                                           {"up"},
		`histogram_quantile(0.9, sum by (le) (rate(gpuadmit_x_seconds_bucket[$__rate_interval])))`: {"gpuadmit_x_seconds_bucket"},
	} {
		if diff := cmp.Diff(want, seriesNames(expr)); diff != "" {
			t.Errorf("seriesNames(%q) (-want +got):\n%s", expr, diff)
		}
	}
}

// The chart's copy of the dashboard is the dashboard file, byte for byte:
// Helm reads only files inside the chart.
func TestChartDashboardIsTheDashboardFile(t *testing.T) {
	want, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(chartDashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from %s; copy it: cp deploy/%s deploy/%s", chartDashboardFile, dashboardFile, dashboardFile, chartDashboardFile)
	}
}

// With grafana.dashboard.enabled the chart renders a ConfigMap the Grafana
// sidecar picks up: the sidecar's label (kube-prometheus-stack's default,
// or the one set), the namespace and folder set, and the dashboard file as
// its one key. Off, the default, it renders none.
func TestHelmGrafanaDashboard(t *testing.T) {
	tl := findTools(t)
	if _, err := tl.templateErr(t, "--show-only", "templates/grafana.yaml"); err == nil {
		t.Error("the default rendering has a dashboard ConfigMap; want none unless grafana.dashboard.enabled")
	}
	want, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		args                     []string
		label, value, ns, folder string
	}{
		"defaults": {label: "grafana_dashboard", value: "1", ns: namespace},
		"set": {args: []string{"--set", "grafana.dashboard.label=my_dashboards", "--set-string", "grafana.dashboard.labelValue=yes",
			"--set", "grafana.dashboard.namespace=monitoring", "--set", "grafana.dashboard.folder=GPU"},
			label: "my_dashboards", value: "yes", ns: "monitoring", folder: "GPU"},
	} {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"--set", "grafana.dashboard.enabled=true", "--show-only", "templates/grafana.yaml"}, tc.args...)
			out, err := tl.templateErr(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			var cm corev1.ConfigMap
			if err := yaml.UnmarshalStrict(out, &cm); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if cm.Kind != "ConfigMap" || cm.Namespace != tc.ns {
				t.Errorf("got %s %s/%s, want a ConfigMap in %s", cm.Kind, cm.Namespace, cm.Name, tc.ns)
			}
			if got := cm.Labels[tc.label]; got != tc.value {
				t.Errorf("label %s = %q, want %q (labels %v)", tc.label, got, tc.value, cm.Labels)
			}
			if got := cm.Annotations["k8s-sidecar-target-directory"]; got != tc.folder {
				t.Errorf("annotation k8s-sidecar-target-directory = %q, want %q", got, tc.folder)
			}
			if diff := cmp.Diff(strings.TrimRight(string(want), "\n"), cm.Data["gpuadmit.json"]); diff != "" {
				t.Errorf("data gpuadmit.json (-dashboard file +chart):\n%s", diff)
			}
		})
	}
}
