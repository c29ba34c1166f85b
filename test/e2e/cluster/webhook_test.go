package cluster

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestWebhookBinary runs gpuadmit as its own cmd/webhook processes (the
// webhook and the controller), as the admission benchmark does: each becomes
// ready as its ServiceAccount (its informers list and watch under
// deploy/base's RBAC), the webhook serves its metrics on
// WebhookMetricsURL and its profiles on WebhookPprofAddr (ports handed to
// it bound), stops, and restarts with its log appended. It needs
// the control-plane binaries `make test` builds; without them it is
// skipped, unless GPUADMIT_REQUIRE_E2E asks for a failure.
func TestWebhookBinary(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	binDir := os.Getenv("GPUADMIT_E2E_BIN")
	if binDir == "" {
		binDir = filepath.Join(root, "test/e2e/.bin/v1.37.0")
	}
	if _, err := os.Stat(filepath.Join(binDir, "kube-apiserver")); err != nil {
		if os.Getenv("GPUADMIT_REQUIRE_E2E") != "" {
			t.Fatalf("control-plane binaries missing in %s (run hack/e2e-binaries.sh): %v", binDir, err)
		}
		t.Skipf("control-plane binaries missing in %s; `make test` builds them", binDir)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "gpuadmit")
	build := exec.Command("go", "build", "-o", bin, "./cmd/webhook")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/webhook: %v\n%s", err, out)
	}
	ctx := context.Background()
	c, err := Start(ctx, Options{BinDir: binDir, Root: root, LogDir: dir, WebhookBinary: bin, WebhookPprof: PprofFreePort,
		Skip: []string{"kube-scheduler", "kube-controller-manager", "kwok"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()

	url := c.WebhookMetricsURL()
	if body, err := get(url); err != nil || !strings.Contains(body, "gpuadmit_policy_active_revision") {
		t.Fatalf("GET %s: err %v, want gpuadmit's metrics in:\n%.500s", url, err, body)
	}
	body, err := get(url)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, `gpuadmit_cache_objects{kind="Namespace"}`) {
		t.Errorf("GET %s: no gpuadmit_cache_objects for the Namespace informer", url)
	}
	pprof := "http://" + c.WebhookPprofAddr() + "/debug/pprof/"
	if body, err := get(pprof); err != nil || !strings.Contains(body, "goroutine") {
		t.Errorf("GET %s: err %v, want the profiles' index in:\n%.300s", pprof, err, body)
	}
	// The constant of docs/scale.md's memory formula: the process with
	// its informers synced and (almost) nothing in them.
	t.Logf("idle webhook:\n%s", grepLines(body, "process_resident_memory_bytes ", "go_memstats_heap_inuse_bytes ", "go_memstats_heap_alloc_bytes ", "gpuadmit_cache_objects{"))
	c.StopWebhook()
	if got := c.WebhookMetricsURL(); got != "" {
		t.Errorf("WebhookMetricsURL after StopWebhook = %q, want empty", got)
	}
	if _, err := get(url); err == nil {
		t.Errorf("GET %s answered after StopWebhook: the process is still running", url)
	}
	if err := c.StartWebhook(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	log, err := os.ReadFile(filepath.Join(dir, "webhook.log"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(log), `"starting gpuadmit"`); n != 2 {
		t.Errorf("webhook.log holds %d starts, want both runs' (2):\n%s", n, c.Tail("webhook", 20))
	}
}

func get(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// grepLines are the lines of text that start with one of prefixes.
func grepLines(text string, prefixes ...string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "\n")
}
