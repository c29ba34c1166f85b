package admission

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSmoke runs the benchmark small (4 clients, 20 pods per configuration,
// 50 nodes) on the real control plane: every configuration creates its pods
// without an error, gpuadmit and OPA mutate every pod, and every pod shape
// comes out of OPA as it comes out of gpuadmit. It needs the binaries `make
// test` builds; without them it is skipped, unless GPUADMIT_REQUIRE_E2E
// (control plane) or GPUADMIT_REQUIRE_TOOLS=1 (opa) asks for a failure.
func TestSmoke(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := os.Getenv("GPUADMIT_E2E_BIN")
	if bin == "" {
		bin = filepath.Join(root, "test/e2e/.bin/v1.37.0")
	}
	if _, err := os.Stat(filepath.Join(bin, "kube-apiserver")); err != nil {
		if os.Getenv("GPUADMIT_REQUIRE_E2E") != "" {
			t.Fatalf("control-plane binaries missing in %s (run hack/e2e-binaries.sh): %v", bin, err)
		}
		t.Skipf("control-plane binaries missing in %s; `make test` builds them", bin)
	}
	opa := FindOPA(root)
	if opa == "" {
		if os.Getenv("GPUADMIT_REQUIRE_TOOLS") == "1" {
			t.Fatal("opa missing (run hack/tools.sh)")
		}
		t.Skip("opa missing; hack/tools.sh installs it")
	}
	var progress bytes.Buffer
	rep, err := Run(context.Background(), Options{Levels: []int{4}, Pods: 20, Rounds: 1, Nodes: 50,
		Root: root, BinDir: bin, OPA: opa, Progress: &progress})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	t.Log("\n" + progress.String())
	if len(rep.Results) != len(Configurations) {
		t.Fatalf("%d results, want one per configuration (%d)", len(rep.Results), len(Configurations))
	}
	for _, r := range rep.Results {
		if r.Errors != 0 || len(r.Latency.Percentiles) != 100 {
			t.Errorf("%s: %d errors (%s), %d latency percentiles", r.Config, r.Errors, strings.Join(r.ErrorLines, "; "), len(r.Latency.Percentiles))
		}
		mutates := r.Config == Gpuadmit || r.Config == OPA
		if mutates && r.Mutated != r.Pods || !mutates && r.Mutated != 0 {
			t.Errorf("%s: %d of %d pods came back mutated", r.Config, r.Mutated, r.Pods)
		}
		if r.APIServer != nil && (r.APIServer.Calls < float64(r.Pods) || r.APIServer.WebhookErrors != 0) {
			t.Errorf("%s: the API server counted %v calls and %v failed calls for %d pods", r.Config, r.APIServer.Calls, r.APIServer.WebhookErrors, r.Pods)
		}
	}
	if len(rep.Equivalence) != len(shapes) {
		t.Fatalf("%d pod shapes compared, want %d", len(rep.Equivalence), len(shapes))
	}
	for _, e := range rep.Equivalence {
		if e.Diff != "" || len(e.Gpuadmit.NodeSelector) == 0 || e.Gpuadmit.PriorityClassName == "" {
			t.Errorf("%s: gpuadmit %+v, OPA %+v: %s", e.Pod, e.Gpuadmit, e.OPA, e.Diff)
		}
	}
	dir := t.TempDir()
	if err := rep.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	rep.Markdown(&table)
	t.Log("\n" + table.String())
}
