// Package hack holds the scripts make test runs; this test keeps the Go
// modules that build Kubernetes in step with gpuadmit's own module.
package hack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// make test builds every Go module below -trimpath, and a package compiles
// once for all of them only where it and everything it imports are the
// same version in each. These modules share most of Kubernetes' libraries
// and their dependencies with gpuadmit's module (golang.org/x/sys and
// x/net alone reach nearly every package), so a version apart compiles
// thousands of packages twice on a cold run. The containerd module
// (test/e2e/tools/node) is left out: make test builds containerd with cgo
// off, so it shares no package with the others whatever its versions.
var inStep = []struct {
	dir string
	// apart says which of the module's requirements may differ, and why.
	apart func(module string) bool
}{
	{dir: "scheduler"},
	{dir: "bench"},
	{dir: "test/e2e/tools"},
	// Kueue v0.19.2 builds against the Kubernetes 1.36 libraries and
	// not against 1.37's, so those, and what 1.36's API server pins
	// (cel-go, etcd's client), are its own.
	{dir: "test/e2e/tools/kueue", apart: func(m string) bool {
		return strings.HasPrefix(m, "k8s.io/") || strings.HasPrefix(m, "sigs.k8s.io/") ||
			m == "github.com/google/cel-go" || strings.HasPrefix(m, "go.etcd.io/etcd/")
	}},
}

func TestModulesShareTheVersionsOfGpuadmits(t *testing.T) {
	root := ".."
	main := requirements(t, filepath.Join(root, "go.mod"))
	all := map[string]map[string]string{}
	for _, m := range inStep {
		req := requirements(t, filepath.Join(root, m.dir, "go.mod"))
		all[m.dir] = req
		for mod, v := range req {
			if m.apart != nil && m.apart(mod) {
				continue
			}
			if w, ok := main[mod]; ok && w != v {
				t.Errorf("%s/go.mod has %s %s, gpuadmit's go.mod %s: pin the same version in both (go get %s@<the higher>)", m.dir, mod, v, w, mod)
			}
		}
	}
	// The scheduler module and the control-plane tools build the same
	// Kubernetes packages: they must agree on what gpuadmit's module does
	// not name too.
	for mod, v := range all["scheduler"] {
		if w, ok := all["test/e2e/tools"][mod]; ok && w != v {
			t.Errorf("scheduler/go.mod has %s %s, test/e2e/tools/go.mod %s: pin the same version in both", mod, v, w)
		}
	}
}

// requirements reads a go.mod's required versions, with its replacements
// applied (the Kubernetes modules pin their staging modules there).
func requirements(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse(path, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := map[string]string{}
	for _, r := range f.Require {
		req[r.Mod.Path] = r.Mod.Version
	}
	if len(req) == 0 {
		t.Fatalf("%s: no requirements read", path)
	}
	// Under -trimpath a package's cache key carries the version its module
	// is required at, not the replacement's, so k8s.io/x v0.0.0 replaced by
	// v0.37.0 compiles apart from k8s.io/x v0.37.0: both count.
	for _, r := range f.Replace {
		if v, ok := req[r.Old.Path]; ok && r.New.Version != "" && r.New.Version != v {
			req[r.Old.Path] = v + " => " + r.New.Version
		}
	}
	return req
}
