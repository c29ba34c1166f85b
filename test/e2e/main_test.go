// Package e2e tests gpuadmit against a real control plane: kube-apiserver and
// etcd, kube-scheduler, kube-controller-manager and kwok's fake GPU nodes, all
// as processes on loopback (see package cluster). hack/e2e-binaries.sh builds
// and caches them; `make test` runs it first.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuadmit/gpuadmit/test/e2e/cluster"
)

// sealWindow is the webhook's --seal-window here: far longer than a
// reinvocation on loopback takes, and short enough for a test to wait out
// (the default, 90s, is sized for a real API server's --request-timeout).
const sealWindow = 10 * time.Second

var (
	env       *cluster.Cluster
	policyDir string // the webhook's --policies: a symlink swapped by the policy tests
	root      = func() string { r, _ := filepath.Abs("../.."); return r }()
)

func TestMain(m *testing.M) {
	bin := os.Getenv("GPUADMIT_E2E_BIN")
	if bin == "" {
		bin = filepath.Join(root, "test/e2e/.bin/v1.37.0")
	}
	if _, err := os.Stat(filepath.Join(bin, "kube-apiserver")); err != nil {
		if os.Getenv("GPUADMIT_REQUIRE_E2E") != "" {
			fmt.Fprintf(os.Stderr, "e2e: control-plane binaries missing in %s (run hack/e2e-binaries.sh): %v\n", bin, err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "e2e: skipped: control-plane binaries missing in %s; `make test` builds them\n", bin)
		os.Exit(0)
	}
	os.Exit(run(m, bin))
}

func run(m *testing.M, bin string) int {
	ctx := context.Background()
	var err error
	if policyDir, err = preparePolicies(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: step policies:", err)
		return 1
	}
	env, err = cluster.Start(ctx, cluster.Options{BinDir: bin, Root: root, Policies: policyDir, SealWindow: sealWindow})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: start control plane:", err)
		return 1
	}
	defer env.Stop()
	if err := setup(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: step setup:", err)
		dumpLogs()
		return 1
	}
	code := m.Run()
	if code != 0 {
		dumpLogs()
		return code
	}
	// A passing run leaves nothing behind; a failing one keeps its logs.
	defer os.RemoveAll(env.LogDir)
	defer os.RemoveAll(filepath.Dir(policyDir))
	return code
}

// dumpLogs prints the end of every component's log after a failure.
func dumpLogs() {
	for _, c := range []string{"webhook", "controller", "kube-scheduler", gpuadmitScheduler, "kube-controller-manager", "kwok", "kube-apiserver"} {
		fmt.Fprintf(os.Stderr, "\n===== last lines of %s (%s) =====\n%s\n", c, filepath.Join(env.LogDir, c+".log"), env.Tail(c, 40))
	}
}

func setup(ctx context.Context) error {
	if _, err := env.AddNodes(ctx, filepath.Join(root, "examples/nodes.yaml")); err != nil {
		return err
	}
	for _, f := range []string{"deploy/base/priorityclasses.yaml", "examples/namespace.yaml", "examples/priorityclass.yaml", "test/e2e/testdata/setup.yaml"} {
		if err := env.Apply(ctx, filepath.Join(root, f)); err != nil {
			return err
		}
	}
	return nil
}
