// Package policies holds gpuadmit's default policy set: Rego modules, their
// data and their tests. The binaries embed it; a platform team starts from a
// copy of this directory in Git.
package policies

import "embed"

// FS is the default policy set, embedded in every gpuadmit binary.
//
//go:embed *.rego *.yaml
var FS embed.FS
