// Package listener holds the TCP ports that tests and benchmarks give the
// servers they start, from the moment a port is chosen until something
// serves on it. A port chosen by binding port 0, closing, and handing the
// number on can be taken by any process on the machine before the server
// binds it (go test runs packages side by side, each starting control
// planes). Two remedies, in order of preference:
//
//   - hand the bound listener itself over: to a server in this process, or
//     to a child process as an inherited file descriptor (Pass, Inherited),
//     so the port is never free between choice and serving;
//   - for a program that takes only a port number (etcd, kube-scheduler,
//     OPA), start it again on a new port when its bind fails with
//     EADDRINUSE (Retry, Taken).
package listener

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// Loopback binds a port the kernel chooses on host (127.0.0.1 when empty).
// The port stays bound until the listener is closed or handed over.
func Loopback(host string) (*net.TCPListener, error) {
	if host == "" {
		host = "127.0.0.1"
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", host, err)
	}
	return l.(*net.TCPListener), nil
}

// fdPrefix starts the address that names an inherited listener.
const fdPrefix = "fd:"

// Pass hands l to the child process cmd will start: it adds a duplicate of
// l's socket to cmd.ExtraFiles, closes l, and returns the address that
// names the socket in the child ("fd:N", for Inherited). The socket stays
// bound and listening throughout; after cmd.Start (or a failed start) the
// caller calls Release, so that the child holds the only descriptor and the
// port is free again once the child exits.
func Pass(cmd *exec.Cmd, l *net.TCPListener) (string, error) {
	f, err := l.File()
	l.Close()
	if err != nil {
		return "", fmt.Errorf("pass %s to %s: %w", l.Addr(), cmd.Path, err)
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, f)
	// The child's descriptors 0-2 are stdin, stdout and stderr; ExtraFiles follow.
	return fdPrefix + strconv.Itoa(2+len(cmd.ExtraFiles)), nil
}

// Release closes this process's copies of the sockets Pass gave cmd.
func Release(cmd *exec.Cmd) {
	for _, f := range cmd.ExtraFiles {
		if f != nil {
			f.Close()
		}
	}
}

// Inherited is the listener addr names when it is an address from Pass
// ("fd:N", a listening socket inherited as descriptor N); nil, nil for any
// other address, which the caller binds itself.
func Inherited(addr string) (net.Listener, error) {
	rest, ok := strings.CutPrefix(addr, fdPrefix)
	if !ok {
		return nil, nil
	}
	fd, err := strconv.Atoi(rest)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("address %q: want fd:N with N ≥ 3, an inherited descriptor", addr)
	}
	f := os.NewFile(uintptr(fd), addr)
	defer f.Close() // FileListener holds a duplicate
	l, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("address %q: %w", addr, err)
	}
	return l, nil
}

// Port chooses a port free on host (127.0.0.1 when empty) now and releases
// it, for a program that takes only a port number. Another process may bind
// it first; start such a program with Retry.
func Port(host string) (int, error) {
	l, err := Loopback(host)
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ErrTaken is a start that failed because a port chosen for it was bound by
// another process first, as a child process reported it (TakenIn).
var ErrTaken = errors.New("a port chosen free was taken before the server bound it")

// Taken reports whether err is a bind that failed because the port was in
// use: this process's (EADDRINUSE) or a child's (ErrTaken).
func Taken(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, ErrTaken)
}

// TakenIn reports whether a child process's output says a bind failed
// because the port was in use: Go programs (etcd, the Kubernetes
// components, OPA) print the errno's text, "address already in use".
func TakenIn(output string) bool {
	return strings.Contains(output, syscall.EADDRINUSE.Error())
}

// Exited is err, the failure of a process that binds its ports itself,
// marked ErrTaken when the process's output says a bind found its port in
// use (TakenIn), so that Retry starts it again on a new port; nil when err
// is nil.
func Exited(err error, output string) error {
	if err != nil && TakenIn(output) {
		return fmt.Errorf("%w: %w", ErrTaken, err)
	}
	return err
}

// Retry calls start with a port from Port(host) until it returns nil or an
// error that is not Taken, or tries starts have failed; it returns the
// port of the start that succeeded.
func Retry(host string, tries int, start func(port int) error) (int, error) {
	for i := 1; ; i++ {
		port, err := Port(host)
		if err != nil {
			return 0, err
		}
		err = start(port)
		if err == nil {
			return port, nil
		}
		if i >= tries || !Taken(err) {
			return 0, fmt.Errorf("start %d of %d on port %d: %w", i, tries, port, err)
		}
	}
}
