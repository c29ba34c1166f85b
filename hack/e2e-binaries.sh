#!/usr/bin/env bash
# Builds the control plane the end-to-end tests run, once per version, into
# test/e2e/.bin/<version>/ (git-ignored), or $GPUADMIT_E2E_BIN, where the
# tests look when it is set: kube-apiserver, kube-scheduler and
# kube-controller-manager and kubectl from the k8s.io/kubernetes module
# (test/e2e/tools), and kwok for fake nodes from the same module. etcd comes
# from Debian's etcd-server package. Later runs find the binaries and take
# seconds.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
k8s=v1.37.0
# kwok's version is the one test/e2e/tools/go.mod pins.
kwok=$(cd "$root/test/e2e/tools" && go list -m -f '{{.Version}}' sigs.k8s.io/kwok)
certmanager=v1.21.2
kueue=v0.19.2 # also in test/e2e/tools/kueue/go.mod
out=${GPUADMIT_E2E_BIN:-$root/test/e2e/.bin/$k8s}
mkdir -p "$out"

if ! command -v etcd >/dev/null 2>&1 && [ ! -x /usr/bin/etcd ]; then
  echo "e2e: installing etcd from Debian's etcd-server package" >&2
  if [ "$(id -u)" = 0 ]; then sudo=""; else sudo=sudo; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq etcd-server >/dev/null
fi
ln -sf "$(command -v etcd || echo /usr/bin/etcd)" "$out/etcd"

ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
# kubectl comes at the same version, from the same module: the real-node
# Install tests run docs/install.md's commands with it, and the dev cluster's users
# use it. Its first build took 15 minutes on a shared two-core machine (490
# CPU-seconds, from an empty build cache); later runs find it.
# Whatever is missing is built by one go build, so that one binary's link runs
# beside the others' compiles and links: with every package compiled, linking
# the four one after another took 55 s on two cores, together 26 s.
missing=()
for c in kube-apiserver kube-scheduler kube-controller-manager kubectl; do
  [ -x "$out/$c" ] || missing+=("k8s.io/kubernetes/cmd/$c")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "e2e: building ${missing[*]##*/} $k8s (first time only, several minutes)" >&2
  tmp=$(mktemp -d "$out/.build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (cd "$root/test/e2e/tools" && go build -trimpath -ldflags "$ldflags" -o "$tmp/" "${missing[@]}")
  mv "$tmp"/* "$out/"
fi
# kwok from the same module: it compiles against the client-go, apimachinery
# and the rest that the control plane has just compiled, so only kwok's own
# packages compile (`go install sigs.k8s.io/kwok/cmd/kwok@version` would
# compile its own versions of them all).
if [ ! -x "$out/kwok" ]; then
  echo "e2e: building kwok $kwok" >&2
  (cd "$root/test/e2e/tools" && go build -trimpath -o "$out/kwok.tmp" sigs.k8s.io/kwok/cmd/kwok && mv "$out/kwok.tmp" "$out/kwok")
fi
# kwok's stage files (node ready, pod ready/complete/delete) and cert-manager's
# CRDs come from their Go modules, so the tests validate against the real files.
if [ ! -d "$out/kwok-stages" ]; then
  dir=$(go mod download -json "sigs.k8s.io/kwok@$kwok" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  mkdir -p "$out/kwok-stages.tmp"
  cp "$dir/kustomize/stage/node/fast/node-initialize.yaml" "$dir"/kustomize/stage/pod/fast/pod-*.yaml "$out/kwok-stages.tmp/"
  mv "$out/kwok-stages.tmp" "$out/kwok-stages"
fi
if [ ! -d "$out/cert-manager-crds" ]; then
  dir=$(go mod download -json "github.com/cert-manager/cert-manager@$certmanager" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  mkdir -p "$out/cert-manager-crds.tmp"
  cp "$dir"/deploy/crds/*.yaml "$out/cert-manager-crds.tmp/"
  rm -f "$out/cert-manager-crds.tmp/README.md"
  mv "$out/cert-manager-crds.tmp" "$out/cert-manager-crds"
fi
# Kueue's controller manager and CRDs, for the test of Kueue-managed Jobs:
# built from Kueue's Go module (test/e2e/tools/kueue), CRDs from the same.
if [ ! -x "$out/kueue" ]; then
  echo "e2e: building kueue $kueue (first time only, a few minutes)" >&2
  (cd "$root/test/e2e/tools/kueue" && go build -trimpath -o "$out/kueue.tmp" sigs.k8s.io/kueue/cmd/kueue && mv "$out/kueue.tmp" "$out/kueue")
fi
if [ ! -d "$out/kueue-crds" ]; then
  dir=$(cd "$root/test/e2e/tools/kueue" && go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)
  mkdir -p "$out/kueue-crds.tmp"
  cp "$dir"/config/components/crd/bases/*.yaml "$out/kueue-crds.tmp/"
  mv "$out/kueue-crds.tmp" "$out/kueue-crds"
fi
echo "$out"
