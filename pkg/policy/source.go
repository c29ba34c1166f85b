package policy

import (
	"io/fs"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/loader"

	"github.com/gpuadmit/gpuadmit/policies"
)

// Source is where a policy set is read from: a directory on disk, an OPA
// bundle, or a file system.
type Source struct {
	// Dir is the policy directory; when empty, Bundle or FS is read instead.
	Dir string
	// Bundle is an OPA bundle file (.tar.gz); used when Dir is empty.
	Bundle string
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

// Path is Directory(path), or an OPA bundle when path ends in .tar.gz.
func Path(path string) Source {
	if strings.HasSuffix(path, ".tar.gz") {
		return Source{Bundle: path, Name: path}
	}
	return Directory(path)
}

// load reads the set's Rego modules and data documents.
func (s Source) load() (*loader.Result, error) {
	fl := loader.NewFileLoader().
		WithRegoVersion(ast.RegoV1).
		WithCapabilities(Capabilities()).
		WithProcessAnnotation(true).
		WithFollowSymlinks(true)
	if s.Dir == "" && s.Bundle != "" {
		return loadBundle(fl, s.Bundle)
	}
	root := s.Dir
	if root == "" {
		fl, root = fl.WithFS(s.FS), "."
	}
	return fl.Filtered([]string{root}, skip)
}

// loadBundle reads an OPA bundle into the same shape as a directory.
func loadBundle(fl loader.FileLoader, path string) (*loader.Result, error) {
	b, err := fl.AsBundle(path)
	if err != nil {
		return nil, err
	}
	res := &loader.Result{Documents: b.Data, Modules: map[string]*loader.RegoFile{}}
	if res.Documents == nil {
		res.Documents = map[string]any{}
	}
	for _, m := range b.Modules {
		res.Modules[m.Path] = &loader.RegoFile{Name: m.Path, Parsed: m.Parsed, Raw: m.Raw}
	}
	return res, nil
}

// skip leaves out, below the root, dot-files and dot-directories (.git,
// and the ..data / ..2026_… entries of a mounted ConfigMap, whose visible
// names are symlinks into them) and kustomize's build file: the default
// set's directory holds a kustomization.yaml that makes its ConfigMap, and
// a copy of that directory in Git keeps it, but it is no data document.
func skip(_ string, info fs.FileInfo, depth int) bool {
	if depth == 0 {
		return false
	}
	switch name := info.Name(); {
	case strings.HasPrefix(name, "."):
		return true
	case !info.IsDir() && kustomization[name]:
		return true
	}
	return false
}

// kustomization are the file names kustomize reads a kustomization from.
var kustomization = map[string]bool{"kustomization.yaml": true, "kustomization.yml": true, "Kustomization": true}
