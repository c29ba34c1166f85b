package policy

import (
	"io/fs"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/loader"

	"github.com/gpuadmit/gpuadmit/policies"
)

// Source is where a policy set is read from: a directory on disk, or a file system.
type Source struct {
	// Dir is the policy directory; when empty, FS is read instead.
	Dir string
	// FS holds the set at its root when Dir is empty.
	FS fs.FS
	// Name says where the set came from, in messages and logs.
	Name string
}

// Embedded is the default policy set compiled into the binary.
func Embedded() Source {
	return Source{FS: policies.FS, Name: "embedded"}
}

// Directory is a policy set on disk (a Git checkout, a mounted ConfigMap).
func Directory(dir string) Source {
	return Source{Dir: dir, Name: dir}
}

// load reads the set's Rego modules and data documents.
func (s Source) load() (*loader.Result, error) {
	fl := loader.NewFileLoader().
		WithRegoVersion(ast.RegoV1).
		WithProcessAnnotation(true).
		WithFollowSymlinks(true)
	root := s.Dir
	if root == "" {
		fl, root = fl.WithFS(s.FS), "."
	}
	return fl.Filtered([]string{root}, skipHidden)
}

// skipHidden leaves out dot-files and dot-directories below the root: .git,
// and the ..data / ..2026_… entries of a mounted ConfigMap (whose visible
// names are symlinks into them).
func skipHidden(_ string, info fs.FileInfo, depth int) bool {
	return depth > 0 && strings.HasPrefix(info.Name(), ".")
}
