package deploy_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

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
