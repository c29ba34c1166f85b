// Command devcluster starts the end-to-end control plane for people: the
// API server, scheduler, controller-manager, kwok with the example GPU nodes,
// and gpuadmit's webhook, then waits for SIGTERM or Ctrl-C and stops it all.
// `make dev-cluster` runs it in the background; `make dev-cluster-down` stops it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/gpuadmit/gpuadmit/test/e2e/cluster"
)

func main() {
	dir := flag.String("dir", ".dev-cluster", "where logs, the kubeconfig and the ready marker go")
	bin := flag.String("bin", "test/e2e/.bin/v1.37.0", "control-plane binaries (hack/e2e-binaries.sh)")
	policies := flag.String("policies", "", "policy directory for the webhook; default: the embedded policies")
	flag.Parse()
	if err := run(*dir, *bin, *policies); err != nil {
		fmt.Fprintln(os.Stderr, "dev-cluster:", err)
		os.Exit(1)
	}
}

func run(dir, bin, policies string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, _ := os.Getwd()
	dir, _ = filepath.Abs(dir)
	bin, _ = filepath.Abs(bin)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	c, err := cluster.Start(ctx, cluster.Options{BinDir: bin, Root: root, Policies: policies, LogDir: dir})
	if err != nil {
		return err
	}
	defer c.Stop()
	if _, err := c.AddNodes(ctx, filepath.Join(root, "examples/nodes.yaml")); err != nil {
		return err
	}
	for _, f := range []string{"deploy/base/priorityclasses.yaml", "examples/namespace.yaml", "examples/priorityclass.yaml", "test/e2e/testdata/setup.yaml"} {
		if err := c.Apply(ctx, filepath.Join(root, f)); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "ready"), []byte(c.Kubeconfig+"\n"), 0o644); err != nil {
		return err
	}
	<-ctx.Done()
	os.Remove(filepath.Join(dir, "ready"))
	return nil
}
