package main

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestLinksNoBenchmarkOrHarness keeps the user's command line free of what
// only gpuadmit-bench and the tests need: a `go run ./cmd/gpuadmit` on a
// fresh clone should neither download nor compile them.
func TestLinksNoBenchmarkOrHarness(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("no go tool to list the dependencies with: %v", err)
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		t.Fatalf("go list -deps: %v\n%s", err, ee.Stderr)
	} else if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	// A list without the command's own packages would pass anything.
	for _, want := range []string{"github.com/gpuadmit/gpuadmit/cmd/gpuadmit", "github.com/gpuadmit/gpuadmit/pkg/offline"} {
		if !slices.Contains(deps, want) {
			t.Fatalf("go list -deps lacks %s; got:\n%s", want, out)
		}
	}
	forbidden := map[string]string{
		"the benchmark harness":       "github.com/gpuadmit/gpuadmit/bench",
		"the end-to-end test cluster": "github.com/gpuadmit/gpuadmit/test",
		"envtest's control plane":     "sigs.k8s.io/controller-runtime/pkg/envtest",
		"the plotting library":        "gonum.org/v1/plot",
		"NVIDIA's container toolkit":  "github.com/NVIDIA/nvidia-container-toolkit",
	}
	for what, tree := range forbidden {
		for _, p := range deps {
			if p == tree || strings.HasPrefix(p, tree+"/") {
				t.Errorf("cmd/gpuadmit links %s (%s); it belongs in bench/cmd/gpuadmit-bench or the tests", p, what)
			}
		}
	}
}
