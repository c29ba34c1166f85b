package admission

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestMain lets the test binary be the no-op webhook too: Run starts its
// own executable with NoopCommand, as gpuadmit-bench has it.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == NoopCommand {
		os.Exit(serveNoop(os.Args[2:]))
	}
	os.Exit(m.Run())
}

func serveNoop(args []string) int {
	var o NoopOptions
	fs := flag.NewFlagSet(NoopCommand, flag.ContinueOnError)
	fs.StringVar(&o.Host, "host", "127.0.0.1", "")
	fs.IntVar(&o.Port, "port", 9443, "")
	fs.StringVar(&o.CertDir, "cert-dir", "", "")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", "0", "")
	fs.StringVar(&o.ReplayPatch, "replay-patch", "", "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := ServeNoop(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestSmoke runs the benchmark small (4 clients, 100 pods per configuration,
// 50 nodes) on the real control plane, gpuadmit and the no-op webhook as
// processes of their own. 100 pods take each webhook process several of
// /proc's 10 ms ticks (20 took the no-op one tick or none), so its CPU is
// never read as zero by chance. It runs every configuration, replay too,
// so its pods are of one template. The test checks that: every configuration creates its pods without an
// error, gpuadmit, OPA, patch and replay mutate every pod, replay answers
// with a patch captured from gpuadmit, every pod shape comes out of
// OPA as it comes out of gpuadmit, each webhook server's metrics and CPU
// time are read from its process, and gpuadmit's memo counts a lookup per
// pod. It needs the binaries `make test` builds; without them it is
// skipped, unless GPUADMIT_REQUIRE_E2E (control plane) or
// GPUADMIT_REQUIRE_TOOLS=1 (opa) asks for a failure.
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
	rep, err := Run(context.Background(), Options{Levels: []int{4}, Pods: 100, Rounds: 1, Nodes: 50,
		Configs: AllConfigurations, Mix: MixTemplate, Root: root, BinDir: bin, OPA: opa, Progress: &progress})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	t.Log("\n" + progress.String())
	if len(rep.Results) != len(AllConfigurations) {
		t.Fatalf("%d results, want one per configuration (%d)", len(rep.Results), len(AllConfigurations))
	}
	if rep.Replay == nil || len(rep.Replay.Ops) == 0 || rep.Replay.Bytes == 0 {
		t.Errorf("replay patch %+v, want gpuadmit's changes to the template pod", rep.Replay)
	}
	for _, r := range rep.Results {
		if r.Errors != 0 || len(r.Latency.Percentiles) != 100 {
			t.Errorf("%s: %d errors (%s), %d latency percentiles", r.Config, r.Errors, strings.Join(r.ErrorLines, "; "), len(r.Latency.Percentiles))
		}
		mutates := r.Config == Gpuadmit || r.Config == OPA || r.Config == Patch || r.Config == Replay
		if mutates && r.Mutated != r.Pods || !mutates && r.Mutated != 0 {
			t.Errorf("%s: %d of %d pods came back mutated", r.Config, r.Mutated, r.Pods)
		}
		if r.APIServer != nil && (r.APIServer.Calls < float64(r.Pods) || r.APIServer.WebhookErrors != 0) {
			t.Errorf("%s: the API server counted %v calls and %v failed calls for %d pods", r.Config, r.APIServer.Calls, r.APIServer.WebhookErrors, r.Pods)
		}
		if r.Config != None && (len(r.Server) == 0 || r.Server[0].Count < float64(r.Pods)) {
			t.Errorf("%s: server histograms %+v, want each webhook's own /metrics to count its %d pods", r.Config, r.Server, r.Pods)
		}
		if proc := map[string]string{Gpuadmit: webhookName, Noop: NoopCommand, Patch: NoopCommand, Replay: NoopCommand, OPA: "opa"}[r.Config]; proc != "" && r.CPU.MsPerPod[proc] == 0 {
			t.Errorf("%s: CPU by process %v, want the time of its own process, %s", r.Config, r.CPU.MsPerPod, proc)
		}
		for _, rd := range r.Rounds {
			if rd.CPUTotalMsPerPod <= 0 || rd.CPUMsPerPod["kube-apiserver"] <= 0 {
				t.Errorf("%s round %d: CPU %v (total %v), want each round's own CPU per pod", r.Config, rd.Round, rd.CPUMsPerPod, rd.CPUTotalMsPerPod)
			}
		}
		if r.Config == Gpuadmit && (r.Memo == nil || r.Memo.Hits+r.Memo.Misses < float64(r.Pods)) {
			t.Errorf("gpuadmit: memo lookups %+v, want at least one per pod (%d)", r.Memo, r.Pods)
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
