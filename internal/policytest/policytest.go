// Package policytest gives tests gpuadmit's default policy set (package
// policies) with some files replaced, added or left out: the one copy the
// policy engine's, the memo's and the end-to-end tests start from.
package policytest

import (
	"testing"
	"testing/fstest"

	"github.com/gpuadmit/gpuadmit/policies"
)

// Files is the default set's files by name with files replaced or added;
// a file given an empty body is left out.
func Files(files map[string]string) (map[string][]byte, error) {
	entries, err := policies.FS.ReadDir(".")
	if err != nil {
		return nil, err
	}
	out := make(map[string][]byte, len(entries)+len(files))
	for _, e := range entries {
		b, err := policies.FS.ReadFile(e.Name())
		if err != nil {
			return nil, err
		}
		out[e.Name()] = b
	}
	for name, body := range files {
		if body == "" {
			delete(out, name)
			continue
		}
		out[name] = []byte(body)
	}
	return out, nil
}

// MapFS is Files as a file system (a policy.Source's FS); an error fails t.
func MapFS(t testing.TB, files map[string]string) fstest.MapFS {
	t.Helper()
	set, err := Files(files)
	if err != nil {
		t.Fatal(err)
	}
	fsys := make(fstest.MapFS, len(set))
	for name, b := range set {
		fsys[name] = &fstest.MapFile{Data: b}
	}
	return fsys
}
