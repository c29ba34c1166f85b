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

// proc is a control-plane component running as a child process in its own
// process group, killed with this process if it dies (Pdeathsig).
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	once sync.Once
}

func startProc(path, name, logDir string, args ...string) (*proc, error) {
	logf, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return nil, err
	}
	return startProcLog(path, name, logf, args...)
}

// startProcLog is startProc with the log file given; it takes logf over.
func startProcLog(path, name string, logf *os.File, args ...string) (*proc, error) {
	return startProcEnv(path, name, logf, nil, args...)
}

// startProcEnv is startProcLog with env added to this process's environment.
func startProcEnv(path, name string, logf *os.File, env []string, args ...string) (*proc, error) {
	cmd := exec.Command(path, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, log: logf, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// stop sends SIGTERM to the process group, then SIGKILL after five
// seconds; it stops the process once however often it is called.
func (p *proc) stop() { p.once.Do(p.terminate) }

func (p *proc) terminate() {
	pgid := -p.cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
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
