package main

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestLinksNoNodeSide keeps the webhook a static binary (it is built with
// CGO_ENABLED=0) free of the node agent's NVIDIA libraries: the container
// toolkit (nvcdi) and go-nvml's cgo library belong to cmd/agent only.
func TestLinksNoNodeSide(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("no go tool to list the dependencies with: %v", err)
	}
	cmd := exec.Command("go", "list", "-deps", ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		t.Fatalf("go list -deps: %v\n%s", err, ee.Stderr)
	} else if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	// A list without the command's own packages would pass anything.
	for _, want := range []string{"github.com/gpuadmit/gpuadmit/cmd/webhook", "github.com/gpuadmit/gpuadmit/pkg/mutate"} {
		if !slices.Contains(deps, want) {
			t.Fatalf("go list -deps lacks %s; got:\n%s", want, out)
		}
	}
	forbidden := map[string]string{
		"NVIDIA's container toolkit": "github.com/NVIDIA/nvidia-container-toolkit",
		"go-nvml":                    "github.com/NVIDIA/go-nvml",
		"the node agent":             "github.com/gpuadmit/gpuadmit/pkg/agent",
	}
	for what, tree := range forbidden {
		for _, p := range deps {
			if p == tree || strings.HasPrefix(p, tree+"/") {
				t.Errorf("cmd/webhook links %s (%s); it belongs to cmd/agent", p, what)
			}
		}
	}
}
