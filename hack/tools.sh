#!/usr/bin/env bash
# Installs the tools that render and check deploy/ — helm and kustomize — and
# opa, the OPA server bench/admission compares gpuadmit with, into .bin/tools/
# (git-ignored), each only if it is missing, and prints that directory; and
# promtool (deploy/prometheus's rule tests) from Debian's prometheus package,
# onto the PATH, only if it is missing. deploy/render_test.go and
# bench/admission look there (or in $GPUADMIT_TOOLS). helm, kustomize and opa
# are built from the control-plane module (test/e2e/tools), at the versions
# its go.mod pins, so they compile against the Kubernetes libraries the
# control plane compiles; the first run builds them from source and takes a
# few minutes, later runs take milliseconds. Versions can be overridden:
# HELM_VERSION=v3.x KUSTOMIZE_VERSION=v5.x OPA_VERSION=v1.x.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tools=$root/test/e2e/tools
# pinned MODULE prints the version of MODULE test/e2e/tools/go.mod pins.
pinned() { (cd "$tools" && go list -m -f '{{.Version}}' "$1"); }
helm_version=${HELM_VERSION:-$(pinned helm.sh/helm/v3)}
# kustomize at the version test/e2e/tools pins, the one kubectl v1.37 embeds
# (`kubectl apply -k`).
kustomize_version=${KUSTOMIZE_VERSION:-$(pinned sigs.k8s.io/kustomize/kustomize/v5)}
# The OPA release gpuadmit's policy engine is built with: hack/modules_test.go
# keeps test/e2e/tools/go.mod's opa at gpuadmit's go.mod's.
opa_version=${OPA_VERSION:-$(pinned github.com/open-policy-agent/opa)}
out=${GPUADMIT_TOOLS:-$root/.bin/tools}
mkdir -p "$out"

# install NAME VERSION MODULE PACKAGE [LDFLAGS]: builds PACKAGE into $out
# unless $out already holds NAME at VERSION (a stamp file records what was
# installed). At the version test/e2e/tools pins for MODULE, it is built from
# that module, with cgo on as the control plane is built: its Kubernetes
# libraries, x/net, grpc, otel and the rest are then the packages the control
# plane compiled (CGO_ENABLED=0 would change net and everything above it), and
# only the tool's own packages compile. Another version (an override) is
# built with `go install PACKAGE@VERSION`, from its own go.mod, which compiles
# its whole dependency graph again.
install() {
  local name=$1 version=$2 mod=$3 pkg=$4 ldflags="-s -w ${5:-}"
  if [ -x "$out/$name" ] && [ "$(cat "$out/.$name.version" 2>/dev/null)" = "$version" ]; then
    return
  fi
  echo "tools: installing $name $version (first time only)" >&2
  if [ "$version" = "$(pinned "$mod")" ]; then
    (cd "$tools" && go build -trimpath -ldflags="$ldflags" -o "$out/$name.tmp" "$pkg")
    mv "$out/$name.tmp" "$out/$name"
  else
    GOBIN="$out" CGO_ENABLED=0 go install -trimpath -ldflags="$ldflags" "$pkg@$version"
  fi
  echo "$version" >"$out/.$name.version"
}

# Helm's release build stamps its version and the Kubernetes version that
# `helm template` assumes (the minor of the client-go it is built with: 1.37
# for v3.22); a build without these flags would leave "v3.22" and
# Kubernetes 1.20.
h=helm.sh/helm/v3
install helm "$helm_version" $h $h/cmd/helm "-X $h/internal/version.version=$helm_version \
  -X $h/pkg/chartutil.k8sVersionMajor=1 -X $h/pkg/chartutil.k8sVersionMinor=${HELM_KUBE_MINOR:-37} \
  -X $h/pkg/lint/rules.k8sVersionMajor=1 -X $h/pkg/lint/rules.k8sVersionMinor=${HELM_KUBE_MINOR:-37}"
install kustomize "$kustomize_version" sigs.k8s.io/kustomize/kustomize/v5 sigs.k8s.io/kustomize/kustomize/v5
install opa "$opa_version" github.com/open-policy-agent/opa github.com/open-policy-agent/opa

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
