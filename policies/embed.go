// Package policies holds gpuadmit's default policy set: Rego modules, their
// data and their tests. The binaries embed it; kustomization.yaml makes it
// the ConfigMap of deploy/overlays/configmap; a platform team starts from a
// copy of this directory in Git.
package policies

import "embed"

// FS is the default policy set, embedded in every gpuadmit binary. It
// holds kustomization.yaml too (a pattern cannot leave one file out), which
// the policy loader skips as it skips it in a directory.
//
//go:embed *.rego *.yaml
var FS embed.FS
