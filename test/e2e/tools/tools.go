//go:build tools

// Package tools pins the commands the end-to-end and deploy tests build:
// the control plane, kwok, helm, kustomize and opa. They share this module's
// versions of Kubernetes' libraries and what those import, so each of them
// compiles only its own packages once the control plane is built.
package tools

import (
	_ "github.com/open-policy-agent/opa"
	_ "helm.sh/helm/v3/cmd/helm"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "sigs.k8s.io/kustomize/kustomize/v5"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
