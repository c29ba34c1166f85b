// Package deploy holds gpuadmit's Kubernetes manifests and the code that renders them: the
// kustomize base and overlays and the Helm chart. Its tests render every
// variant with kustomize and helm (installed by hack/tools.sh), decode each
// object strictly, and check the operating rules on the result: fail-closed only for GPU
// pods, its own namespace and kube-system excluded, a short timeout, no side
// effects, replicas with a PodDisruptionBudget.
package deploy
