package policy

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/open-policy-agent/opa/v1/bundle"
	"sigs.k8s.io/yaml"

	"github.com/gpuadmit/gpuadmit/policies"
)

const brokenRego = "package gpuadmit\nplacement[ := 1\n"

// extraTest makes a set differ from the default (a new revision) and still pass.
const extraTest = "package extra_test\ntest_ok if { true }\n"

// writeSet writes the default set into dir, with files replaced ("" deletes).
func writeSet(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	copyEmbedded(t, dir)
	for name, body := range files {
		p := filepath.Join(dir, name)
		if body == "" {
			os.Remove(p)
			continue
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// swapLink points link at target atomically, as git-sync and the kubelet do.
func swapLink(t *testing.T, target, link string) {
	t.Helper()
	tmp := link + ".tmp"
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
}

func TestWatcherKeepsTheLastGoodSetThenTakesTheFix(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	writeSet(t, filepath.Join(root, "v1"), nil)
	writeSet(t, filepath.Join(root, "v2"), map[string]string{"placement.rego": brokenRego})
	writeSet(t, filepath.Join(root, "v3"), map[string]string{"extra_test.rego": extraTest})
	link := filepath.Join(root, "current")
	swapLink(t, "v1", link)

	var failures []string
	e := NewEngine(Options{})
	w := NewWatcher(e, link, logr.Discard(), WatchOptions{OnFailure: func(_ string, err error) { failures = append(failures, err.Error()) }})
	w.Check(ctx)
	good := e.Active()
	if good == nil || w.Status().Revision != good.Revision {
		t.Fatalf("first check: active %v, status %+v", good, w.Status())
	}

	swapLink(t, "v2", link)
	w.Check(ctx)
	w.Check(ctx) // the same broken set is reported once, not per check
	if e.Active() != good {
		t.Errorf("a broken set replaced revision %s", good.Revision)
	}
	if st := w.Status(); !strings.Contains(st.Failure, "placement.rego") || st.Revision != good.Revision {
		t.Errorf("status after the broken set = %+v, want the failure and the good revision", st)
	}
	if len(failures) != 1 {
		t.Errorf("OnFailure called %d times for one broken set, want 1", len(failures))
	}

	swapLink(t, "v3", link)
	w.Check(ctx)
	if e.Active() == good || w.Status().Failure != "" {
		t.Errorf("after the fix: active %s (good was %s), status %+v; want the new set live and no failure", e.Active().Revision, good.Revision, w.Status())
	}
}

// TestWatcherSeesAConfigMapSwap: the kubelet updates a ConfigMap volume by
// writing a new timestamped directory and swapping the ..data symlink; the
// visible files are symlinks through ..data and never change themselves.
func TestWatcherSeesAConfigMapSwap(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mount := t.TempDir()
	writeSet(t, filepath.Join(mount, "..2026_11_22_1"), nil)
	// The second version edits a file in place: the visible symlinks stay the same.
	tests, _ := policies.FS.ReadFile("decision_test.rego")
	writeSet(t, filepath.Join(mount, "..2026_11_22_2"), map[string]string{"decision_test.rego": string(tests) + "\ntest_added if { true }\n"})
	swapLink(t, "..2026_11_22_1", filepath.Join(mount, "..data"))
	entries, _ := policies.FS.ReadDir(".")
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".rego") && !strings.HasSuffix(name, ".yaml") {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(mount, name)); err != nil {
			t.Fatal(err)
		}
	}
	e := NewEngine(Options{})
	w := NewWatcher(e, mount, logr.Discard(), WatchOptions{Interval: time.Hour, Debounce: 10 * time.Millisecond})
	go w.Start(ctx)
	first := waitRevision(t, w, "")

	swapLink(t, "..2026_11_22_2", filepath.Join(mount, "..data"))
	second := waitRevision(t, w, first)
	if e.Active().Revision != second {
		t.Errorf("engine revision %s, watcher says %s", e.Active().Revision, second)
	}
}

// waitRevision waits, through file events only (the interval is an hour),
// for the watcher to report a revision other than old.
func waitRevision(t *testing.T, w *Watcher, old string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if st := w.Status(); st.Revision != "" && st.Revision != old {
			return st.Revision
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no new revision after 10s (still %q, status %+v)", old, w.Status())
	return ""
}

func TestWatcherLoadsAnOPABundle(t *testing.T) {
	b := bundle.Bundle{Data: map[string]any{}}
	entries, _ := policies.FS.ReadDir(".")
	for _, en := range entries {
		raw, _ := policies.FS.ReadFile(en.Name())
		if strings.HasSuffix(en.Name(), ".rego") {
			b.Modules = append(b.Modules, bundle.ModuleFile{URL: "/" + en.Name(), Path: "/" + en.Name(), Raw: raw})
		}
	}
	raw, _ := policies.FS.ReadFile("data.yaml")
	if err := yaml.Unmarshal(raw, &b.Data); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := bundle.NewWriter(&buf).Write(b); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "policies.tar.gz")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	e := NewEngine(Options{})
	w := NewWatcher(e, path, logr.Discard(), WatchOptions{})
	w.Check(context.Background())
	if e.Active() == nil {
		t.Fatalf("bundle not activated: %+v", w.Status())
	}
	if len(e.Active().Tests) == 0 {
		t.Error("the bundle's tests were not run")
	}
}
