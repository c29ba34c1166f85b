package listener

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// childAddrEnv, when set, makes the test binary the child of
// TestPassLeavesNoWindow: it serves "ok" on the address it names.
const childAddrEnv = "LISTENER_TEST_CHILD_ADDR"

func TestMain(m *testing.M) {
	if addr := os.Getenv(childAddrEnv); addr != "" {
		if err := serveChild(addr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serveChild serves on the listener addr names, inherited or bound here,
// as a server program given its address on the command line would.
func serveChild(addr string) error {
	l, err := Inherited(addr)
	if err != nil {
		return err
	}
	if l == nil {
		if l, err = net.Listen("tcp", addr); err != nil {
			return err
		}
	}
	return http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") }))
}

// TestPassLeavesNoWindow: a port handed to a child with Pass is never free
// between its choice and the child's serving: another listener that tries
// to bind it after the choice, before the child starts and while it starts,
// fails, and the child serves on it. Once the child exits the port is free
// (this process kept no copy). Choosing a port, closing it and giving the
// child the number fails here: the other listener gets the port and the
// child cannot bind it.
func TestPassLeavesNoWindow(t *testing.T) {
	l, err := Loopback("")
	if err != nil {
		t.Fatal(err)
	}
	hostPort := l.Addr().String()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	addr, err := Pass(cmd, l)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), childAddrEnv+"="+addr)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	grab := func(when string) {
		t.Helper()
		other, err := net.Listen("tcp", hostPort)
		if err == nil {
			other.Close()
			t.Fatalf("%s: another listener bound %s, chosen for the child", when, hostPort)
		}
		if !Taken(err) {
			t.Fatalf("%s: binding %s failed otherwise than taken: %v", when, hostPort, err)
		}
	}
	grab("after the choice, before the child starts")
	err = cmd.Start()
	Release(cmd)
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	grab("while the child starts")
	body, err := getWithin("http://"+hostPort, 10*time.Second, exited)
	if err != nil || body != "ok" {
		cmd.Process.Kill()
		t.Fatalf("GET the child on %s: %q, %v; child's output:\n%s", hostPort, body, err, out.String())
	}
	cmd.Process.Kill()
	<-exited
	free, err := net.Listen("tcp", hostPort)
	if err != nil {
		t.Fatalf("%s still bound after the child exited (this process kept a copy?): %v", hostPort, err)
	}
	free.Close()
}

// getWithin GETs url until it answers, the child exits, or timeout passes.
func getWithin(url string, timeout time.Duration, exited <-chan error) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get(url)
		if err == nil {
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			return string(b), err
		}
		select {
		case werr := <-exited:
			return "", fmt.Errorf("child exited (%v) before serving: %w", werr, err)
		default:
		}
		if time.Now().After(deadline) {
			return "", err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestInheritedRefusesABadDescriptor(t *testing.T) {
	for _, addr := range []string{"fd:", "fd:x", "fd:2"} {
		if _, err := Inherited(addr); err == nil || !strings.Contains(err.Error(), addr) {
			t.Errorf("Inherited(%q) = %v, want an error naming the address", addr, err)
		}
	}
	if l, err := Inherited("127.0.0.1:8080"); l != nil || err != nil {
		t.Errorf("Inherited(host:port) = %v, %v; want nil, nil (the caller binds it)", l, err)
	}
}

// TestTaken: a real bind on a bound port is Taken, and so is a child's
// report of one; other failures are not.
func TestTaken(t *testing.T) {
	l, err := Loopback("")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, bindErr := net.Listen("tcp", l.Addr().String())
	if bindErr == nil || !Taken(bindErr) {
		t.Errorf("Taken(%v) = false, want true", bindErr)
	}
	if !TakenIn("listen tcp 127.0.0.1:35269: " + bindErr.(*net.OpError).Err.Error()) {
		t.Errorf("TakenIn misses the bind error Go prints: %v", bindErr)
	}
	if Taken(errors.New("no kubeconfig")) || TakenIn("connection refused") {
		t.Error("another failure counted as a taken port")
	}
	exit := errors.New("etcd exited: exit status 1")
	inUse := "listen tcp 127.0.0.1:35269: " + bindErr.(*net.OpError).Err.Error()
	if err := Exited(exit, inUse); !Taken(err) || !errors.Is(err, exit) {
		t.Errorf("Exited with a log saying the port was in use = %v, want ErrTaken wrapping %v", err, exit)
	}
	if err := Exited(exit, "connection refused"); err != exit {
		t.Errorf("Exited with another log = %v, want %v as it was", err, exit)
	}
	if err := Exited(nil, inUse); err != nil {
		t.Errorf("Exited(nil, …) = %v, want nil", err)
	}
}

// TestRetry: a start whose port was taken is tried again on another port,
// at most tries times in all; any other failure is not retried.
func TestRetry(t *testing.T) {
	taken := fmt.Errorf("%w: etcd exited", ErrTaken)
	tests := map[string]struct {
		fails     []error
		wantCalls int
		wantErr   error
	}{
		"taken twice, then runs":   {fails: []error{taken, taken}, wantCalls: 3},
		"taken three times: fails": {fails: []error{taken, taken, taken}, wantCalls: 3, wantErr: ErrTaken},
		"another failure at once":  {fails: []error{os.ErrNotExist}, wantCalls: 1, wantErr: os.ErrNotExist},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var ports []int
			port, err := Retry("", 3, func(port int) error {
				ports = append(ports, port)
				if len(ports) <= len(tt.fails) {
					return tt.fails[len(ports)-1]
				}
				return nil
			})
			if len(ports) != tt.wantCalls {
				t.Errorf("%d starts, want %d", len(ports), tt.wantCalls)
			}
			switch {
			case tt.wantErr == nil && (err != nil || port != ports[len(ports)-1]):
				t.Errorf("Retry = %d, %v; want the last start's port %d", port, err, ports[len(ports)-1])
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Errorf("Retry: %v, want %v", err, tt.wantErr)
			}
			for _, p := range ports {
				if p <= 0 {
					t.Errorf("start given port %s", strconv.Itoa(p))
				}
			}
		})
	}
}
