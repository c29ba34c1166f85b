package admission

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/gpuadmit/gpuadmit/internal/listener"
)

// child is a webhook server the benchmark runs as a process of its own,
// so that its CPU time and garbage collection are its own, apart from the
// clients'.
type child struct {
	name string
	cmd  *exec.Cmd
	log  string // its log file
	done chan struct{}
}

// startChild runs the executable path under the name name: through a
// symlink of that name in logDir, so that /proc's comm (the file name the
// process was started from) is name. It logs to logDir/<name>.log and dies
// with this process.
func startChild(path, name, logDir string, args ...string) (*child, error) {
	path, err := filepath.Abs(path) // the link lives in logDir
	if err != nil {
		return nil, err
	}
	link := filepath.Join(logDir, name)
	_ = os.Remove(link)
	if err := os.Symlink(path, link); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(link, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, log: logf.Name(), done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(c.done) }()
	return c, nil
}

// waitServing waits until the child completes a TLS handshake on addr with
// a certificate signed by caPEM, as the API server will, and its /metrics
// at metricsURL answers.
func (c *child) waitServing(addr string, caPEM []byte, metricsURL string, timeout time.Duration) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: time.Second}, Config: &tls.Config{RootCAs: pool}}
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := c.exited(); err != nil {
			return err
		}
		conn, err := dialer.Dial("tcp", addr)
		if err != nil {
			continue
		}
		conn.Close()
		resp, err := http.Get(metricsURL)
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
	}
	return fmt.Errorf("%s not serving on %s after %s", c.name, addr, timeout)
}

// exited is nil while the child runs, else why it stopped:
// listener.ErrTaken when its log says a port it was given had been taken
// (it binds its ports itself, after they were chosen free), so that its
// start is made again on new ports.
func (c *child) exited() error {
	select {
	case <-c.done:
	default:
		return nil
	}
	b, _ := os.ReadFile(c.log)
	return listener.Exited(fmt.Errorf("%s exited (%s); see %s", c.name, c.cmd.ProcessState, c.log), string(b))
}

// stop sends SIGTERM, then SIGKILL after five seconds.
func (c *child) stop() {
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
	}
}

// startNoop runs the no-op webhook as this executable's NoopCommand, named
// noop-webhook in /proc, serving on host:port with the certificate in
// certDir (signed by caPEM) and /metrics on a free loopback port, whose URL
// it returns.
func startNoop(host string, port int, certDir string, caPEM []byte, logDir, replayPatch string) (*child, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	metrics, err := listener.Port("127.0.0.1")
	if err != nil {
		return nil, "", err
	}
	o := NoopOptions{Host: host, Port: port, CertDir: certDir, MetricsAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(metrics)), ReplayPatch: replayPatch}
	c, err := startChild(self, NoopCommand, logDir, o.Args()...)
	if err != nil {
		return nil, "", err
	}
	url := "http://" + o.MetricsAddr + "/metrics"
	if err := c.waitServing(net.JoinHostPort(host, strconv.Itoa(port)), caPEM, url, 30*time.Second); err != nil {
		c.stop()
		return nil, "", err
	}
	return c, url, nil
}

// webhookName is the file name Run builds cmd/webhook as, and so gpuadmit's
// process name in the CPU table.
const webhookName = "gpuadmit"

// linkWebhook links a given cmd/webhook binary into dir as webhookName, so
// that /proc names its process gpuadmit whatever the file is called (a
// binary built at another commit, gpuadmit-eae5c66): the CPU table has one
// column for gpuadmit, and the no-op's and gpuadmit's columns never mix.
func linkWebhook(bin, dir string) (string, error) {
	abs, err := filepath.Abs(bin)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(abs); err != nil {
		return "", fmt.Errorf("--webhook-binary: %w", err)
	}
	out := filepath.Join(dir, webhookName)
	if abs == out {
		return out, nil // already so named (a --log-dir's build, given back)
	}
	// A --log-dir used before holds the last run's link or build.
	if err := os.Remove(out); err != nil && !os.IsNotExist(err) {
		return "", fmt.Errorf("replace %s: %w", out, err)
	}
	if err := os.Symlink(abs, out); err != nil {
		return "", fmt.Errorf("link %s as %s: %w", abs, out, err)
	}
	return out, nil
}

// WebhookBinary returns a cmd/webhook for a run logging into dir, named
// gpuadmit there: given linked, or, when given is empty, root's built.
func WebhookBinary(ctx context.Context, root, given, dir string) (string, error) {
	if given != "" {
		return linkWebhook(given, dir)
	}
	return buildWebhook(ctx, root, dir)
}

// buildWebhook builds root's cmd/webhook into dir, as deployed images hold it.
func buildWebhook(ctx context.Context, root, dir string) (string, error) {
	out := filepath.Join(dir, webhookName)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/webhook")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/webhook: %w\n%s", err, b)
	}
	return out, nil
}
