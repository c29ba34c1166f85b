package policy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"
	dto "github.com/prometheus/client_model/go"
)

// TestCapabilitiesRefuseEveryNondeterministicBuiltin: every builtin this
// OPA marks nondeterministic is left out of what policies may call, every
// other one is kept. A builtin a new OPA adds and marks is refused without
// a change here; one OPA stopped marking would fail the named list.
func TestCapabilitiesRefuseEveryNondeterministicBuiltin(t *testing.T) {
	allowed := map[string]bool{}
	for _, b := range Capabilities().Builtins {
		allowed[b.Name] = true
	}
	var refused []string
	for _, b := range ast.Builtins {
		switch {
		case b.Nondeterministic && allowed[b.Name]:
			t.Errorf("%s is nondeterministic, and policies may call it", b.Name)
		case b.Nondeterministic:
			refused = append(refused, b.Name)
		case !allowed[b.Name]:
			t.Errorf("%s is deterministic, and policies may not call it", b.Name)
		}
	}
	slices.Sort(refused)
	if diff := cmp.Diff(refused, RefusedBuiltins()); diff != "" {
		t.Errorf("RefusedBuiltins (-computed +got)\n%s", diff)
	}
	for _, name := range []string{"http.send", "net.lookup_ip_addr", "opa.runtime", "time.now_ns", "rand.intn", "uuid.rfc4122",
		"io.jwt.encode_sign", "io.jwt.decode_verify", "json.verify_schema", "json.match_schema"} {
		if allowed[name] || !slices.Contains(refused, name) {
			t.Errorf("%s: allowed %t, refused %t; want refused", name, allowed[name], slices.Contains(refused, name))
		}
	}
	if caps := Capabilities(); caps.AllowNet == nil || len(caps.AllowNet) != 0 {
		t.Errorf("AllowNet = %#v, want empty (no host), not nil (any host)", caps.AllowNet)
	}
}

// callOf is a module whose rule `answer`, on line 5, calls the builtin
// with as many arguments as it takes (input values type-check as any).
func callOf(b *ast.Builtin) string {
	args := make([]string, len(b.Decl.FuncArgs().Args))
	for i := range args {
		args[i] = fmt.Sprintf("input.a%d", i)
	}
	return fmt.Sprintf("package gpuadmit.probe\n\nimport rego.v1\n\nanswer := %s(%s)\n", b.Name, strings.Join(args, ", "))
}

// TestASetCallingARefusedBuiltinIsRefused loads, for every refused
// builtin, the default set plus a rule calling it: the load fails naming
// the builtin, the rule and its line, the failure is counted, and the last
// good set keeps serving.
func TestASetCallingARefusedBuiltinIsRefused(t *testing.T) {
	ctx := context.Background()
	e := NewEngine(Options{})
	good, err := e.Load(ctx, Embedded())
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]*ast.Builtin{}
	for _, b := range ast.Builtins {
		if b.Nondeterministic {
			tests[b.Name] = b
		}
	}
	for name, b := range tests {
		t.Run(name, func(t *testing.T) {
			src := callOf(b)
			// The rule is good Rego: with every builtin it compiles.
			full := ast.NewCompiler().WithDefaultRegoVersion(ast.RegoV1)
			if full.Compile(map[string]*ast.Module{"probe.rego": ast.MustParseModule(src)}); full.Failed() {
				t.Fatalf("with every builtin: %v", full.Errors)
			}
			failures := counted(t)
			_, err := e.Load(ctx, Source{FS: embeddedWith(t, map[string]string{"probe.rego": src}), Name: "probe"})
			var re *RefusedError
			if !errors.As(err, &re) {
				t.Fatalf("Load: err = %v, want a *RefusedError", err)
			}
			want := []RefusedCall{{Builtin: name, Rule: "data.gpuadmit.probe.answer", At: "probe.rego:5"}}
			if diff := cmp.Diff(want, re.Calls); diff != "" {
				t.Errorf("refused calls (-want +got)\n%s", diff)
			}
			if !strings.Contains(err.Error(), name+" in rule data.gpuadmit.probe.answer at probe.rego:5") {
				t.Errorf("error %q does not name the builtin, the rule and where", err)
			}
			if got := counted(t) - failures; got != 1 {
				t.Errorf("load failures counted %v, want 1", got)
			}
			if e.Active() != good {
				t.Errorf("the active set changed to %s", e.Active().Revision)
			}
		})
	}
}

// TestTheSetsTestsAreSandboxed: a test that calls a refused builtin, or
// replaces one with `with`, is refused like a rule; the tester itself runs
// with the sandbox's compiler, and no request leaves while a set loads.
func TestTheSetsTestsAreSandboxed(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		fmt.Fprint(w, `{}`)
	}))
	defer srv.Close()
	tests := map[string]struct {
		file, want string
	}{
		"a test sends": {file: "package send_test\n\nimport rego.v1\n\ntest_send if {\n\thttp.send({\"method\": \"get\", \"url\": \"" + srv.URL + "\"}).status_code == 200\n}\n",
			want: "http.send in rule data.send_test.test_send at x_test.rego:6"},
		"a test mocks the clock": {file: "package mock_test\n\nimport rego.v1\n\ntest_mock if {\n\tdata.gpuadmit.decision with time.now_ns as 1\n}\n",
			want: "time.now_ns in rule data.mock_test.test_mock at x_test.rego:6"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			src := Source{FS: embeddedWith(t, map[string]string{"x_test.rego": tc.file}), Name: name}
			_, err := Compile(context.Background(), src)
			var re *RefusedError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Compile: err = %v, want a *RefusedError naming %s", err, tc.want)
			}
			loaded, err := src.load()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := runTests(context.Background(), loaded); err == nil {
				t.Errorf("the tester ran the set's tests with the refused builtin")
			}
		})
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests reached the server while the sets loaded, want none", n)
	}
}

// TestARuleOfTheSameNameIsNoBuiltin: a set's own function named like a
// refused builtin is the set's, and allowed.
func TestARuleOfTheSameNameIsNoBuiltin(t *testing.T) {
	fsys := embeddedWith(t, map[string]string{"own.rego": "package gpuadmit.own\n\nimport rego.v1\n\ntime.now_ns := 7\n\nx := time.now_ns\n",
		"own_test.rego": "package gpuadmit.own_test\n\nimport rego.v1\n\ntest_own if data.gpuadmit.own.x == 7\n"})
	if _, err := Compile(context.Background(), Source{FS: fsys, Name: "own"}); err != nil {
		t.Errorf("Compile: %v", err)
	}
}

// counted is the load failures counted so far.
func counted(t *testing.T) float64 {
	t.Helper()
	var m dto.Metric
	if err := loadFailures.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestWatcherReportsARefusedSet: a set on disk that calls http.send is
// reported, naming it, in the status readiness shows, and the good set
// keeps serving.
func TestWatcherReportsARefusedSet(t *testing.T) {
	root := t.TempDir()
	writeSet(t, filepath.Join(root, "v1"), nil)
	writeSet(t, filepath.Join(root, "v2"), map[string]string{"send.rego": "package gpuadmit.send\n\nx := http.send({\"method\": \"get\", \"url\": \"http://example.invalid\"})\n"})
	link := filepath.Join(root, "current")
	swapLink(t, "v1", link)
	e := NewEngine(Options{})
	w := NewWatcher(e, link, logr.Discard(), WatchOptions{})
	w.Check(context.Background())
	good := e.Active()
	swapLink(t, "v2", link)
	w.Check(context.Background())
	if e.Active() != good {
		t.Errorf("the refused set replaced revision %s", good.Revision)
	}
	if st := w.Status(); !strings.Contains(st.Failure, "http.send in rule data.gpuadmit.send.x at ") || st.Revision != good.Revision {
		t.Errorf("status = %+v, want the refusal naming http.send and the good revision", st)
	}
}
