package main

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const fakeGPU = "github.com/gpuadmit/gpuadmit/internal/fakegpu"

// TestShippedAgentLinksNoFake keeps the fake NVML and driver root out of
// the agent that ships: only the build tag gpuadmit_fakenvml, which the
// real-node tests' image uses, links package fakegpu. The tagged build is
// listed too, so a test that cannot see the package at all cannot pass.
func TestShippedAgentLinksNoFake(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("no go tool to list the dependencies with: %v", err)
	}
	shipped := deps(t)
	if !slices.Contains(shipped, "github.com/gpuadmit/gpuadmit/pkg/agent") {
		t.Fatalf("go list -deps lacks pkg/agent; got:\n%s", strings.Join(shipped, "\n"))
	}
	if slices.Contains(shipped, fakeGPU) {
		t.Errorf("the shipped cmd/agent links %s; only -tags gpuadmit_fakenvml may", fakeGPU)
	}
	if !slices.Contains(deps(t, "-tags", "gpuadmit_fakenvml"), fakeGPU) {
		t.Errorf("cmd/agent built with -tags gpuadmit_fakenvml does not link %s: the real-node tests' agent would have no fake GPUs", fakeGPU)
	}
}

func deps(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append(append([]string{"list", "-deps"}, args...), ".")...).Output()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		t.Fatalf("go list -deps %v: %v\n%s", args, err, ee.Stderr)
	} else if err != nil {
		t.Fatalf("go list -deps %v: %v", args, err)
	}
	return strings.Fields(string(out))
}
