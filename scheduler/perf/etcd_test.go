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
	"syscall"
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
// shim to stop etcd).
func runEtcdShim() error {
	args, socket, err := shimArgs(os.Args[1:])
	if err != nil {
		return err
	}
	cmd := exec.Command(os.Getenv(realEtcdEnv), args.list...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	l, err := net.Listen("unix", socket)
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go proxy(c, args.client)
		}
	}()
	return cmd.Wait()
}

func proxy(c net.Conn, addr string) {
	defer c.Close()
	up, err := net.Dial("tcp", addr)
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
// a free local port; the socket the harness asked for is returned.
func shimArgs(in []string) (etcdArgs, string, error) {
	port, err := freePort()
	if err != nil {
		return etcdArgs{}, "", err
	}
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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
