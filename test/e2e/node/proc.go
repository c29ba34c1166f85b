package node

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is containerd or the kubelet, run as a child in its own process
// group and killed if this process dies (Pdeathsig). Its log is appended
// to, so a restarted daemon's log follows the first one's.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	once sync.Once
}

// startProc starts path with args and env added to this process's
// environment, its output appended to logPath.
func startProc(logPath string, env []string, path string, args ...string) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "===== %s %s %s\n", time.Now().Format(time.RFC3339), path, strings.Join(args, " "))
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	p := &proc{name: path, cmd: cmd, log: logf, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after ten
// seconds; it stops the process once however often it is called.
func (p *proc) stop() {
	p.once.Do(func() {
		pgid := -p.cmd.Process.Pid
		_ = syscall.Kill(pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(pgid, syscall.SIGKILL)
			<-p.done
		}
		p.log.Close()
	})
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
