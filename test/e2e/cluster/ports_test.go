package cluster

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuadmit/gpuadmit/internal/listener"
)

// serveEnv, when set, makes the test binary a component for StartOnPorts:
// it binds the addresses it is given as arguments itself and serves "ok" on
// them, or exits with another failure when given "fail".
const serveEnv = "CLUSTER_TEST_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) != "" {
		fmt.Fprintln(os.Stderr, serve(os.Args[1:]))
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// serve binds each address and serves on all of them, as a component that
// takes only addresses does; it returns only on failure.
func serve(addrs []string) error {
	var ls []net.Listener
	for _, a := range addrs {
		if a == "fail" {
			return errors.New("no kubeconfig")
		}
		l, err := net.Listen("tcp", a)
		if err != nil {
			return err
		}
		ls = append(ls, l)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") })
	errs := make(chan error, len(ls))
	for _, l := range ls {
		go func() { errs <- http.Serve(l, h) }()
	}
	return <-errs
}

// TestStartOnPorts: a component that binds the addresses it is given
// itself, one of which another process bound between their choice and the
// component's bind, exits saying the port was in use and is started again
// on new addresses, until it runs there or three starts have failed; any
// other failure is not retried. Once stopped, its ports are free.
func TestStartOnPorts(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(serveEnv, "1")
	tests := map[string]struct {
		taken      int  // starts whose second address another listener binds first
		fail       bool // the component exits with another failure
		wantStarts int
		wantErr    string // what the error says; "" for none
		wantTaken  bool   // the error is a taken port (listener.Taken)
	}{
		"free: runs at once":       {wantStarts: 1},
		"taken once, then runs":    {taken: 1, wantStarts: 2},
		"taken three times: fails": {taken: 3, wantStarts: 3, wantErr: "address already in use", wantTaken: true},
		"another failure at once":  {fail: true, wantStarts: 1, wantErr: "no kubeconfig"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := &Cluster{opts: Options{BinDir: filepath.Dir(exe)}, LogDir: t.TempDir()}
			defer c.Stop()
			var starts int
			var taken []string
			args := func(addrs []string) ([]string, error) {
				starts++
				if starts <= tt.taken {
					other, err := net.Listen("tcp", addrs[1])
					if err != nil {
						t.Fatalf("another listener could not bind %s after its choice: %v", addrs[1], err)
					}
					t.Cleanup(func() { other.Close() })
					taken = append(taken, addrs[1])
				}
				if tt.fail {
					return append(addrs, "fail"), nil
				}
				return addrs, nil
			}
			ready := func(addrs []string) (bool, string) {
				for _, a := range addrs {
					if body, err := getSoon("http://" + a); err != nil || body != "ok" {
						return false, fmt.Sprintf("%s: %q, %v", a, body, err)
					}
				}
				return true, ""
			}
			addrs, stop, err := c.StartOnPorts(filepath.Base(exe), 2, 10*time.Second, args, ready)
			if starts != tt.wantStarts {
				t.Errorf("%d starts, want %d", starts, tt.wantStarts)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("StartOnPorts: %v, want an error saying %q", err, tt.wantErr)
				}
				if listener.Taken(err) != tt.wantTaken {
					t.Errorf("listener.Taken(%v) = %t, want %t", err, !tt.wantTaken, tt.wantTaken)
				}
				return
			}
			if err != nil {
				t.Fatalf("StartOnPorts: %v", err)
			}
			if len(addrs) != 2 || addrs[0] == addrs[1] {
				t.Fatalf("addresses %v, want two distinct", addrs)
			}
			for _, a := range addrs {
				if slices.Contains(taken, a) {
					t.Errorf("runs on %s, which another listener holds", a)
				}
				if body, err := getSoon("http://" + a); err != nil || body != "ok" {
					t.Errorf("GET %s: %q, %v; want the component's ok", a, body, err)
				}
			}
			stop()
			for _, a := range addrs {
				l, err := net.Listen("tcp", a)
				if err != nil {
					t.Errorf("%s still bound after stop: %v", a, err)
					continue
				}
				l.Close()
			}
		})
	}
}

// getSoon is get with a short timeout: a listener that never serves
// (another process's, on a taken port) fails it instead of holding it.
func getSoon(url string) (string, error) {
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
