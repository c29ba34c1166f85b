package scale

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// smokeMemoryLimit is TestSmoke's memory limit for the webhook, other
// than deploy/base's 544Mi.
const smokeMemoryLimit = 600 << 20

// TestSmoke runs the benchmark at a tiny size on the real control plane
// (20 nodes, 4 of them DRA; 6 pods a phase; every node's GFD timestamp
// rewritten every 2 seconds), gpuadmit as its own process, and checks that
// each part measured something rather than nothing: churn's label writes
// reached the Nodes (every node carries a rewritten timestamp) and none
// failed; the taint probe's changes each rebuilt the inventory, with a
// duration; churn alone rebuilt nothing; every pod was created and
// reviewed by the webhook, the template pods answered from the memo; the
// webhook's RSS, heap and cache objects, and its and the API server's CPU,
// were read from their processes; the fill's pods reached the cache; the
// webhook ran under the memory limit given, not deploy/base's. It
// needs the control-plane binaries `make test` builds; without them it is
// skipped, unless GPUADMIT_REQUIRE_E2E asks for a failure.
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
	const nodes, pods, clients = 20, 6, 2
	// A churn phase of 6 pods lasts about 70 ms on an idle two-core
	// machine, so the churner must write more often than that for a write
	// to land inside it: 200 ms over 20 nodes is one write every 10 ms
	// (at 2 s, one every 100 ms, an idle run could see none).
	var progress bytes.Buffer
	rep, err := Run(context.Background(), Options{Steps: []int{nodes}, Pods: pods, Clients: clients, ChurnPeriod: 200 * time.Millisecond,
		ChurnWarmup: 3 * time.Second, Probes: 2, Fill: 4, FillChunk: 2, Root: root, BinDir: bin, Progress: &progress,
		WebhookMemoryLimit: smokeMemoryLimit})
	t.Log("\n" + progress.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Steps) != 1 || len(rep.Steps[0].Phases) != 4 {
		t.Fatalf("steps %+v, want one step of four phases", rep.Steps)
	}
	if rep.Settings.WebhookMemoryLimit != smokeMemoryLimit {
		t.Errorf("the webhook ran with a memory limit of %d bytes, want the option's %d over deploy/base's", rep.Settings.WebhookMemoryLimit, smokeMemoryLimit)
	}
	st := rep.Steps[0]
	if st.DRANodes != 4 || st.Slices < 4 {
		t.Errorf("%d DRA nodes, %d slices; want 4 DRA nodes with their slices", st.DRANodes, st.Slices)
	}
	if st.ChurnedNodes != nodes {
		t.Errorf("%d of %d nodes carry a rewritten %s after churn", st.ChurnedNodes, nodes, LabelTimestamp)
	}
	if st.Rebuild.Count < float64(st.Rebuild.Changes) || st.Rebuild.MeanMs <= 0 {
		t.Errorf("rebuild probe %+v, want a rebuild with a duration per taint change", st.Rebuild)
	}
	totalPods, webhookCPU, apiserverCPU := 0, 0.0, 0.0
	for _, p := range st.Phases {
		totalPods += p.Pods
		webhookCPU += p.WebhookCPUSeconds
		apiserverCPU += p.APIServerCPUSeconds
		name := p.Mix + map[bool]string{false: " without churn", true: " with churn"}[p.Churn]
		if p.Pods != pods || p.Errors != 0 {
			t.Errorf("%s: %d pods created, %d errors (%s); want %d and none", name, p.Pods, p.Errors, p.FirstError, pods)
		}
		if p.Reviews < pods || p.ReviewP99Ms <= 0 || p.ReviewP50Ms <= 0 {
			t.Errorf("%s: the webhook counted %v reviews (p50 %v ms, p99 %v ms) for %d pods", name, p.Reviews, p.ReviewP50Ms, p.ReviewP99Ms, pods)
		}
		if p.MemoHits+p.MemoMisses < pods {
			t.Errorf("%s: memo lookups %v hits + %v misses, want one per pod", name, p.MemoHits, p.MemoMisses)
		}
		// The first pod of each client may miss: they start together.
		if p.Mix == "template" && p.MemoHits < pods-clients {
			t.Errorf("%s: %v memo hits of %d pods of one template from %d clients", name, p.MemoHits, pods, clients)
		}
		if len(p.Rebuilds) != 0 {
			t.Errorf("%s: rebuilds %v; neither pods nor GFD's timestamp is a change the inventory reads", name, p.Rebuilds)
		}
		switch {
		case p.Churn && (p.LabelWrites == 0 || p.LabelErrors != 0):
			t.Errorf("%s: %d label writes, %d failed (%s)", name, p.LabelWrites, p.LabelErrors, p.LabelError)
		case !p.Churn && p.LabelWrites != 0:
			t.Errorf("%s: %d label writes without churn", name, p.LabelWrites)
		}
	}
	if webhookCPU <= 0 || apiserverCPU <= 0 {
		t.Errorf("CPU over the phases: gpuadmit %v s, kube-apiserver %v s; want each process's own", webhookCPU, apiserverCPU)
	}
	for when, m := range map[string]Memory{"after the nodes": st.AfterNodes, "after the pods": st.AfterPods} {
		if m.RSSMB <= 0 || m.PeakRSSMB < m.RSSMB || m.HeapMB <= 0 || m.Formula.HeapMB <= 0 {
			t.Errorf("%s: memory %+v, want the process's RSS and heap", when, m)
		}
		if m.Cache["Node"] != nodes || m.Cache["ResourceSlice"] != float64(st.Slices) {
			t.Errorf("%s: cache objects %v, want %d Nodes and %d ResourceSlices", when, m.Cache, nodes, st.Slices)
		}
	}
	if st.AfterNodes.Cache["Pod"] != 0 || st.AfterPods.Cache["Pod"] != float64(totalPods) {
		t.Errorf("cached pods %v before and %v after the phases, want 0 and %d", st.AfterNodes.Cache["Pod"], st.AfterPods.Cache["Pod"], totalPods)
	}
	if len(rep.Fill) != 2 || rep.Fill[1].Memory.Cache["Pod"] != float64(totalPods+4) || rep.Fill[1].Memory.RSSMB <= 0 {
		t.Errorf("fill %+v, want two readings, the last with %d pods cached", rep.Fill, totalPods+4)
	}
	dir := t.TempDir()
	if err := rep.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "| 20 | template | ") {
		t.Errorf("results.md has no row for the template phase:\n%s", md)
	}
	t.Log("\n" + string(md))
}
