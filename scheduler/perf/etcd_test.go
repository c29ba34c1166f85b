package perf

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/gpuadmit/gpuadmit/internal/listener"
)

// The harness starts etcd listening on a Unix socket only
// (--listen-client-urls unix://…/etcd.sock), which etcd 3.5 and later
// accept; Debian's etcd-server, the one make test installs, is 3.4, which
// wants host:port. So the tests put this test binary on PATH as "etcd"
// (etcdShim): run under that name, it starts the real etcd on a local TCP
// port and carries the socket's connections to it, one proxy hop that
// every profile's run pays alike.

// realEtcdEnv names the real etcd for the shim.
const realEtcdEnv = "GPUADMIT_PERF_REAL_ETCD"

// shimDir holds the shim's link; TestMain removes it.
var shimDir string

// etcdShim puts the shim first on PATH, in a new directory, for etcd at
// real. It leaves PATH as it is when real accepts Unix sockets (3.5+).
func etcdShim(real string) error {
	out, err := exec.Command(real, "--version").Output()
	if err != nil {
		return fmt.Errorf("%s --version: %w", real, err)
	}
	if !strings.Contains(string(out), "etcd Version: 3.4.") {
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "gpuadmit-etcd-shim-")
	if err != nil {
		return err
	}
	shimDir = dir
	if err := os.Symlink(self, filepath.Join(dir, "etcd")); err != nil {
		return err
	}
	if err := os.Setenv(realEtcdEnv, real); err != nil {
		return err
	}
	return os.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// isEtcdShim reports whether this process runs as the shim.
func isEtcdShim() bool { return filepath.Base(os.Args[0]) == "etcd" && os.Getenv(realEtcdEnv) != "" }

// runEtcdShim runs the real etcd with the harness's arguments, its client
// URL a free local port instead of the socket, and proxies the socket to
// it until etcd exits; etcd dies with the shim (the harness kills the
// shim to stop etcd). etcd 3.4 takes only a port number and binds it
// itself, so when another process took the port first (etcd says
// "address already in use") it is started again on a new one.
func runEtcdShim() error {
	_, socket, err := shimArgs(os.Args[1:], 0)
	if err != nil {
		return err
	}
	l, err := net.Listen("unix", socket)
	if err != nil {
		return err
	}
	var client atomic.Pointer[string] // where etcd serves now
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go proxy(c, client.Load())
		}
	}()
	_, err = listener.Retry("127.0.0.1", 3, func(port int) error {
		args, _, err := shimArgs(os.Args[1:], port)
		if err != nil {
			return err
		}
		client.Store(&args.client)
		return runEtcd(args.list)
	})
	return err
}

// runEtcd runs the real etcd until it exits; listener.ErrTaken when it
// exits because its port was taken (it says so as it starts).
func runEtcd(args []string) error {
	start := &headWriter{max: 64 << 10}
	cmd := exec.Command(os.Getenv(realEtcdEnv), args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, io.MultiWriter(os.Stderr, start)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return listener.Exited(cmd.Run(), start.String())
}

// headWriter keeps the first max bytes written to it.
type headWriter struct {
	max int
	mu  sync.Mutex
	b   strings.Builder
}

func (w *headWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := w.max - w.b.Len(); room > 0 {
		w.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (w *headWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// proxy carries c to etcd at addr; nil (no etcd started yet) closes c,
// as a dial to an etcd not serving yet would fail.
func proxy(c net.Conn, addr *string) {
	defer c.Close()
	if addr == nil {
		return
	}
	up, err := net.Dial("tcp", *addr)
	if err != nil {
		return
	}
	defer up.Close()
	go func() { _, _ = io.Copy(up, c) }()
	_, _ = io.Copy(c, up)
}

type etcdArgs struct {
	list   []string
	client string // host:port etcd serves clients on
}

// shimArgs rewrites the harness's arguments for etcd 3.4: the client URLs
// a local port; the socket the harness asked for is returned.
func shimArgs(in []string, port int) (etcdArgs, string, error) {
	out := etcdArgs{client: fmt.Sprintf("127.0.0.1:%d", port)}
	socket := ""
	for i := 0; i < len(in); i++ {
		a := in[i]
		name := strings.TrimLeft(a, "-")
		if (name == "listen-client-urls" || name == "advertise-client-urls") && i+1 < len(in) {
			if name == "listen-client-urls" {
				socket = strings.TrimPrefix(in[i+1], "unix://")
			}
			out.list = append(out.list, a, "http://"+out.client)
			i++
			continue
		}
		out.list = append(out.list, a)
	}
	if socket == "" {
		return etcdArgs{}, "", errors.New("etcd shim: no unix:// --listen-client-urls among the arguments")
	}
	return out, socket, nil
}
