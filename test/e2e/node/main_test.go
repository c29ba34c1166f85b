package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuadmit/gpuadmit/test/e2e/cluster"
)

var (
	// node is the one node every test shares; nil when unavailable says why.
	node        *Node
	unavailable error
	root        = func() string { r, _ := filepath.Abs("../../.."); return r }()
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	bin := os.Getenv("GPUADMIT_E2E_BIN")
	if bin == "" {
		bin = filepath.Join(root, "test/e2e/.bin/v1.37.0")
	}
	require := os.Getenv("GPUADMIT_REQUIRE_E2E") != ""
	if unavailable = Check(bin); unavailable != nil {
		if require {
			fmt.Fprintf(os.Stderr, "node: GPUADMIT_REQUIRE_E2E is set and %v\n", unavailable)
			return 1
		}
		// The tests that need the node skip; the rest run.
		code := m.Run()
		fmt.Fprintf(os.Stderr, "\n===== node: the real-node tests were SKIPPED: %v =====\n", unavailable)
		return code
	}
	ctx := context.Background()
	start := time.Now()
	var err error
	if node, err = Start(ctx, Options{BinDir: bin, Root: root}); err != nil {
		fmt.Fprintln(os.Stderr, "node: start:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "node: %s Ready in %s (logs in %s)\n", node.Name, time.Since(start).Round(100*time.Millisecond), node.LogDir)
	code := m.Run()
	if err := node.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "node: stop:", err)
		code = 1
	}
	if code == 0 {
		os.RemoveAll(node.LogDir)
	} else {
		dumpLogs()
	}
	return code
}

// requireNode skips the test where no node could start, with the reason.
func requireNode(t *testing.T) *Node {
	t.Helper()
	if unavailable != nil {
		t.Skipf("no real node: %v", unavailable)
	}
	return node
}

func dumpLogs() {
	for _, c := range []string{"kubelet", "containerd", "kube-controller-manager", "kube-scheduler", "kube-apiserver"} {
		p := filepath.Join(node.LogDir, c+".log")
		fmt.Fprintf(os.Stderr, "\n===== last lines of %s (%s) =====\n%s\n", c, p, cluster.TailFile(p, 40))
	}
}
