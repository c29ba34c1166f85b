package node

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/gpuadmit/gpuadmit/test/e2e/cluster"
)

// startProc starts containerd or the kubelet (cluster.StartProcess), its
// output appended to logPath after a header line, so a restarted daemon's
// log follows the first one's; stopping it waits ten seconds for a clean
// exit before SIGKILL.
func startProc(logPath string, env []string, path string, args ...string) (*cluster.Proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "===== %s %s %s\n", time.Now().Format(time.RFC3339), path, strings.Join(args, " "))
	p, err := cluster.StartProcess(path, path, logf, env, args...)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	p.Grace = 10 * time.Second
	return p, nil
}

// execOutput runs a command to its end and returns its standard output; an
// error carries its standard error.
func execOutput(path string, args ...string) (string, error) {
	cmd := exec.Command(path, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", path, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
