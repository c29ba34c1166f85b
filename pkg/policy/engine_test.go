package policy

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuadmit/gpuadmit/internal/policytest"
	"github.com/gpuadmit/gpuadmit/policies"
)

// TestEmbeddedSetPassesItsOwnTests runs the default set's Rego tests through
// OPA's tester, so `go test ./...` runs them.
func TestEmbeddedSetPassesItsOwnTests(t *testing.T) {
	set, err := Compile(context.Background(), Embedded())
	if err != nil {
		t.Fatalf("Compile(embedded): %v", err)
	}
	if len(set.Tests) < 10 {
		t.Errorf("embedded set ran %d tests, want the whole Rego suite (≥ 10)", len(set.Tests))
	}
	for _, r := range set.Tests {
		if !r.Passed {
			t.Errorf("%s.%s: %s", r.Package, r.Name, r.Message)
		}
	}
	if !strings.HasPrefix(set.Revision, "sha256-") {
		t.Errorf("embedded revision = %q, want a content hash", set.Revision)
	}
}

// embeddedWith returns the default set with files replaced or added (an
// empty body leaves a file out).
func embeddedWith(t *testing.T, files map[string]string) fstest.MapFS {
	return policytest.MapFS(t, files)
}

func TestLoadKeepsTheLastGoodSet(t *testing.T) {
	ctx := context.Background()
	e := NewEngine(Options{})
	if _, err := e.Evaluate(ctx, Input{}); !errors.Is(err, ErrNoActiveSet) {
		t.Fatalf("Evaluate before Load: err = %v, want ErrNoActiveSet", err)
	}
	good, err := e.Load(ctx, Embedded())
	if err != nil {
		t.Fatal(err)
	}
	broken := map[string]Source{
		"syntax error": {FS: embeddedWith(t, map[string]string{"placement.rego": "package gpuadmit\nplacement[ := 1"}), Name: "syntax"},
		"failing test": {FS: embeddedWith(t, map[string]string{"x_test.rego": "package x_test\ntest_no if { 1 == 2 }"}), Name: "failing"},
		"no tests":     {FS: embeddedWith(t, map[string]string{"decision_test.rego": ""}), Name: "untested"},
		"no decision":  {FS: fstest.MapFS{"a.rego": {Data: []byte("package other\nx := 1")}, "a_test.rego": {Data: []byte("package other_test\ntest_x if { data.other.x == 1 }")}}, Name: "nodecision"},
	}
	for name, src := range broken {
		if _, err := e.Load(ctx, src); err == nil {
			t.Errorf("%s: Load succeeded, want an error", name)
		}
		if got := e.Active(); got != good {
			t.Errorf("%s: active set changed to %v after a failed load", name, got.Revision)
		}
	}
	var tf *TestFailure
	if _, err := Compile(ctx, broken["failing test"]); !errors.As(err, &tf) || !strings.Contains(err.Error(), "test_no") {
		t.Errorf("failing test: err = %v, want a *TestFailure naming test_no", err)
	}
	fixed := Source{FS: embeddedWith(t, map[string]string{"extra_test.rego": "package extra_test\ntest_yes if { 1 == 1 }"}), Name: "fixed"}
	next, err := e.Load(ctx, fixed)
	if err != nil {
		t.Fatal(err)
	}
	if e.Active() != next || next.Revision == good.Revision {
		t.Errorf("after a good load: active %q (good %q), want the new revision", e.Active().Revision, good.Revision)
	}
}

func TestRevisionIsGitCommitOfACheckout(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed; the checkout fixture needs it")
	}
	dir := t.TempDir()
	copyEmbedded(t, dir)
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.email=t@example.com", "-c", "user.name=t"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-q", "-m", "policies")
	head := git("rev-parse", "HEAD")
	set, err := Compile(context.Background(), Directory(dir))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("git-"+head[:12], set.Revision); diff != "" {
		t.Errorf("revision (-want +got):\n%s", diff)
	}
	git("pack-refs", "--all")
	if set, err = Compile(context.Background(), Directory(dir)); err != nil || set.Revision != "git-"+head[:12] {
		t.Errorf("after pack-refs: revision %q, err %v; want git-%s", set.Revision, err, head[:12])
	}
}

func TestContentHashIgnoresWhereTheSetIsMounted(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	copyEmbedded(t, a)
	copyEmbedded(t, b)
	sa, err := Compile(context.Background(), Directory(a))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := Compile(context.Background(), Directory(b))
	if err != nil {
		t.Fatal(err)
	}
	emb, _ := Compile(context.Background(), Embedded())
	if sa.Revision != sb.Revision || sa.Revision != emb.Revision {
		t.Errorf("revisions %q, %q, embedded %q: want one content hash", sa.Revision, sb.Revision, emb.Revision)
	}
	if err := os.WriteFile(filepath.Join(b, "data.yaml"), []byte("gpuadmit:\n  config:\n    priorityClasses: {batch: x}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if sc, err := Compile(context.Background(), Directory(b)); err == nil && sc.Revision == sa.Revision {
		t.Errorf("changing data kept revision %q", sc.Revision)
	}
}

func copyEmbedded(t *testing.T, dir string) {
	t.Helper()
	entries, _ := policies.FS.ReadDir(".")
	for _, e := range entries {
		b, _ := policies.FS.ReadFile(e.Name())
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEmbeddedSetPassesStrictCheck: the default set compiles under OPA's
// strict mode (what `opa check --strict` runs: no unused arguments,
// variables or imports), since platform teams start their policy
// repository from a copy of it, and with the sandbox's capabilities. A
// decision_test.rego helper with two unused arguments failed it until
// 2026-11-24.
func TestEmbeddedSetPassesStrictCheck(t *testing.T) {
	loaded, err := Embedded().load()
	if err != nil {
		t.Fatal(err)
	}
	c := newCompiler().WithStrict(true)
	if c.Compile(loaded.ParsedModules()); c.Failed() {
		t.Errorf("opa check --strict: %v", c.Errors)
	}
}
