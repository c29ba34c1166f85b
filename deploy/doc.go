// Package deploy holds gpuadmit's Kubernetes manifests and the code that renders them: the
// kustomize base and overlays and the Helm chart. Its tests render every
// variant with kustomize and helm (installed by hack/tools.sh), decode each
// object strictly, and check the operating rules of DESIGN.md on the result.
package deploy
