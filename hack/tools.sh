#!/usr/bin/env bash
# Installs the tools that render and check deploy/ — helm and kustomize — and
# opa, the OPA server bench/admission compares gpuadmit with, into .bin/tools/
# (git-ignored) with `go install`, each only if it is missing, and prints that
# directory; and promtool (deploy/prometheus's rule tests) from Debian's
# prometheus package, onto the PATH, only if it is missing. deploy/render_test.go and bench/admission look there (or in
# $GPUADMIT_TOOLS). The first run builds them from source and takes a few
# minutes; later runs take milliseconds. Versions can be overridden:
# HELM_VERSION=v3.x KUSTOMIZE_VERSION=v5.x OPA_VERSION=v1.x.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
helm_version=${HELM_VERSION:-v3.22.0}
kustomize_version=${KUSTOMIZE_VERSION:-v5.7.1}
# The OPA release gpuadmit's policy engine is built with (go.mod).
opa_version=${OPA_VERSION:-v1.22.2}
out=${GPUADMIT_TOOLS:-$root/.bin/tools}
mkdir -p "$out"

# install NAME VERSION PACKAGE [LDFLAGS]: go install PACKAGE@VERSION unless
# .bin/tools already holds NAME at VERSION (a stamp file records what was installed).
install() {
  local name=$1 version=$2 pkg=$3 ldflags="-s -w ${4:-}"
  if [ -x "$out/$name" ] && [ "$(cat "$out/.$name.version" 2>/dev/null)" = "$version" ]; then
    return
  fi
  echo "tools: installing $name $version (first time only)" >&2
  GOBIN="$out" CGO_ENABLED=0 go install -trimpath -ldflags="$ldflags" "$pkg@$version"
  echo "$version" >"$out/.$name.version"
}

# Helm's release build stamps its version and the Kubernetes version that
# `helm template` assumes (the minor of the client-go it is built with: 1.37
# for v3.22); `go install` alone would leave "v3.22" and Kubernetes 1.20.
h=helm.sh/helm/v3
install helm "$helm_version" $h/cmd/helm "-X $h/internal/version.version=$helm_version \
  -X $h/pkg/chartutil.k8sVersionMajor=1 -X $h/pkg/chartutil.k8sVersionMinor=${HELM_KUBE_MINOR:-37} \
  -X $h/pkg/lint/rules.k8sVersionMajor=1 -X $h/pkg/lint/rules.k8sVersionMinor=${HELM_KUBE_MINOR:-37}"
install kustomize "$kustomize_version" sigs.k8s.io/kustomize/kustomize/v5
install opa "$opa_version" github.com/open-policy-agent/opa

# promtool, which tests deploy/prometheus's rules and alerts (and checks
# queries), from Debian's prometheus package, as hack/e2e-binaries.sh
# installs etcd: only when missing. The package's prometheus service is not
# started where no init system runs (containers, CI); the end-to-end tests
# run their own prometheus process.
if ! command -v promtool >/dev/null 2>&1; then
  echo "tools: installing promtool from Debian's prometheus package" >&2
  if [ "$(id -u)" = 0 ]; then sudo=""; else sudo=sudo; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
echo "$out"
