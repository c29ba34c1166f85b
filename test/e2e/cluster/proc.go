package cluster

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is a child process in its own process group, killed with this
// process if it dies (Pdeathsig): a control-plane component, or (package
// node) containerd and the kubelet.
type Proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	once sync.Once
	// Grace is how long stop waits after SIGTERM before SIGKILL; zero means 5s.
	Grace time.Duration
}

func startProc(path, name, logDir string, args ...string) (*Proc, error) {
	logf, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return nil, err
	}
	return StartProcess(path, name, logf, nil, args...)
}

// StartProcess starts path with args, env added to this process's
// environment, its output to logf, which it takes over.
func StartProcess(path, name string, logf *os.File, env []string, args ...string) (*Proc, error) {
	return startCmd(exec.Command(path, args...), name, logf, env)
}

// startCmd is StartProcess for a command made ready by the caller (files
// it inherits, say).
func startCmd(cmd *exec.Cmd, name string, logf *os.File, env []string) (*Proc, error) {
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	p := &Proc{name: name, cmd: cmd, log: logf, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// stop sends SIGTERM to the process group, then SIGKILL after Grace (five
// seconds when zero); it stops the process once however often it is called.
func (p *Proc) stop() { p.once.Do(p.terminate) }

// Stop is stop, for other packages.
func (p *Proc) Stop() { p.stop() }

// Signal sends sig to the process group: SIGSTOP freezes a component as a
// hung process would be frozen, holding whatever Lease it held.
func (p *Proc) Signal(sig syscall.Signal) error { return syscall.Kill(-p.cmd.Process.Pid, sig) }

// Kill ends the process group at once with SIGKILL, as a crash or an
// evicted node would: nothing is released on the way out.
func (p *Proc) Kill() {
	p.once.Do(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		p.log.Close()
	})
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *Proc) terminate() {
	grace := p.Grace
	if grace == 0 {
		grace = 5 * time.Second
	}
	pgid := -p.cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-p.done
	}
	p.log.Close()
}

// TailFile returns the last lines of a log file, or why there is none.
func TailFile(path string, lines int) string {
	f, err := os.Open(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	var ring []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		ring = append(ring, sc.Text())
		if len(ring) > lines {
			ring = ring[1:]
		}
	}
	return strings.Join(ring, "\n")
}
