package webhook

import (
	"context"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"github.com/gpuadmit/gpuadmit/pkg/policy"
	"github.com/gpuadmit/gpuadmit/policies"
)

// TestReadinessFollowsThePolicy walks a replica through its policy life:
// not ready before any set is active, ready once one is, and still ready,
// saying so, when a newer set on disk fails to load.
func TestReadinessFollowsThePolicy(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "policies")
	engine := policy.NewEngine(policy.Options{})
	w := policy.NewWatcher(engine, dir, logr.Discard(), policy.WatchOptions{})
	p := &probes{checks: []check{policyCheck(engine, w)}}

	steps := []struct {
		name       string
		do         func(t *testing.T)
		wantStatus int
		wantLine   string
		want       []string
	}{{
		name:       "nothing loaded",
		do:         func(*testing.T) {},
		wantStatus: http.StatusServiceUnavailable,
		wantLine:   "[-]policy: no policy set is active yet",
	}, {
		name:       "the first set on disk fails",
		do:         func(t *testing.T) { writeSet(t, dir, "package gpuadmit\ndecision := {"); w.Check(ctx) },
		wantStatus: http.StatusServiceUnavailable,
		wantLine:   "[-]policy: no policy set is active yet; last load failed: ",
	}, {
		name:       "a good set goes live",
		do:         func(t *testing.T) { writeSet(t, dir, ""); w.Check(ctx) },
		wantStatus: http.StatusOK,
		wantLine:   "[+]policy: revision sha256-",
		want:       []string{"from " + dir},
	}, {
		name:       "a broken set after the good one",
		do:         func(t *testing.T) { writeSet(t, dir, "package gpuadmit\ndecision := {"); w.Check(ctx) },
		wantStatus: http.StatusOK,
		wantLine:   "[+]policy: revision sha256-",
		want:       []string{"; a newer set was NOT activated (at ", "rego_parse_error"},
	}}
	var good string
	for _, s := range steps {
		s.do(t)
		rec := httptest.NewRecorder()
		p.ready(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		body := rec.Body.String()
		if rec.Code != s.wantStatus || !strings.HasPrefix(body, s.wantLine) {
			t.Fatalf("%s: /readyz answered %d %q; want %d starting %q", s.name, rec.Code, body, s.wantStatus, s.wantLine)
		}
		for _, part := range s.want {
			if !strings.Contains(body, part) {
				t.Errorf("%s: /readyz answered %q; want it to say %q", s.name, body, part)
			}
		}
		if s.wantStatus == http.StatusOK {
			rev := engine.Active().Revision
			if good == "" {
				good = rev
			}
			if rev != good || !strings.Contains(body, rev) {
				t.Errorf("%s: active revision %s (readiness %q), want the good set's %s to keep serving", s.name, rev, body, good)
			}
		}
	}
}

// TestReadinessWhileStopping is not ready once shutdown has begun.
func TestReadinessWhileStopping(t *testing.T) {
	engine := policy.NewEngine(policy.Options{})
	if _, err := engine.Load(context.Background(), policy.Embedded()); err != nil {
		t.Fatal(err)
	}
	p := &probes{checks: []check{policyCheck(engine, nil)}}
	p.stopping.Store(true)
	rec := httptest.NewRecorder()
	p.ready(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.HasPrefix(rec.Body.String(), "[-]shutdown: ") ||
		!strings.Contains(rec.Body.String(), "[+]policy: revision ") {
		t.Errorf("/readyz while stopping answered %d %q; want 503 with the shutdown line, then the policy's", rec.Code, rec.Body.String())
	}
}

// TestProbesServeTheListenerHandedToThem: a caller that binds port 0 and
// hands the listener over gets the probes on exactly that port, with
// nothing closed and bound again in between, so no other process can take
// the port meanwhile. The address beside it is one that cannot be bound
// (already taken), so serving there would fail.
func TestProbesServeTheListenerHandedToThem(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	p := &probes{addr: taken.Addr().String(), ln: ln}
	go func() { done <- p.Start(ctx) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil {
		cancel()
		t.Fatalf("GET /healthz on the listener handed over: %v (Start: %v)", err, <-done)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		t.Errorf("/healthz answered %d %q, want 200 ok", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start: %v", err)
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Errorf("%s still accepts connections after the probes stopped", ln.Addr())
	}
}

// writeSet writes the embedded policy set into dir, with placement.rego
// replaced by broken when it is not empty.
func writeSet(t *testing.T, dir, broken string) {
	t.Helper()
	err := fs.WalkDir(policies.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(policies.FS, path)
		if err != nil {
			return err
		}
		if path == "placement.rego" && broken != "" {
			b = []byte(broken)
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(path)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, path), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
