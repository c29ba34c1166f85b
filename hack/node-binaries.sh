#!/usr/bin/env bash
# Builds the node the real-node end-to-end tests (test/e2e/node) run, once
# per version, into test/e2e/.bin/<k8s version>/ (git-ignored), beside the
# control plane that hack/e2e-binaries.sh builds there:
#   kubelet            from k8s.io/kubernetes (test/e2e/tools, as the control plane)
#   containerd, containerd-shim-runc-v2, ctr, runc, cni/loopback,
#   nvidia-container-runtime, nvidia-cdi-hook
#                      from the modules pinned in test/e2e/tools/node/go.mod
#   pause              test/e2e/node/pause, the sandbox image's only file
# It installs Debian's libseccomp-dev (runc links libseccomp) and
# busybox-static (the test image's only binary) when they are missing.
# A binary is rebuilt only when its pinned version changed (the .version file
# beside it), so later runs take seconds.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
k8s=v1.37.0
out=$root/test/e2e/.bin/$k8s
tools=$root/test/e2e/tools
mkdir -p "$out/cni"

missing=()
for p in libseccomp-dev busybox-static; do
  dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "node: installing ${missing[*]} from Debian" >&2
  if [ "$(id -u)" = 0 ]; then sudo=""; else sudo=sudo; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# build NAME VERSION DIR CMD...: runs CMD in DIR (writing $out/NAME.tmp)
# unless $out/NAME exists and was built at VERSION.
build() {
  local name=$1 version=$2 dir=$3
  shift 3
  if [ -x "$out/$name" ] && [ "$(cat "$out/$name.version" 2>/dev/null)" = "$version" ]; then
    return
  fi
  echo "node: building $name $version" >&2
  (cd "$dir" && "$@")
  mv "$out/$name.tmp" "$out/$name"
  echo "$version" >"$out/$name.version"
}
mod() { (cd "$tools/node" && go list -m -f '{{.Version}}' "$1"); }

ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
build kubelet "$k8s" "$tools" \
  go build -trimpath -ldflags "$ldflags" -o "$out/kubelet.tmp" k8s.io/kubernetes/cmd/kubelet

ctrd=$(mod github.com/containerd/containerd/v2)
pkg=github.com/containerd/containerd/v2
cldflags="-s -w -X $pkg/version.Version=$ctrd -X $pkg/version.Package=$pkg"
for c in containerd ctr; do
  build "$c" "$ctrd" "$tools/node" env CGO_ENABLED=0 \
    go build -trimpath -tags "no_btrfs urfave_cli_no_docs" -ldflags "$cldflags" -o "$out/$c.tmp" "$pkg/cmd/$c"
done
build containerd-shim-runc-v2 "$ctrd" "$tools/node" env CGO_ENABLED=0 \
  go build -trimpath -tags "no_btrfs urfave_cli_no_docs no_grpc" -ldflags "$cldflags" -o "$out/containerd-shim-runc-v2.tmp" "$pkg/cmd/containerd-shim-runc-v2"

# runc links libseccomp with cgo (tag seccomp); libpathrs, a Rust library,
# is left out, as runc's Makefile allows.
runc=$(mod github.com/opencontainers/runc)
build runc "$runc" "$tools/node" env CGO_ENABLED=1 \
  go build -trimpath -tags "seccomp urfave_cli_no_docs" -ldflags "-s -w -X main.version=${runc#v}" -o "$out/runc.tmp" github.com/opencontainers/runc

cni=$(mod github.com/containernetworking/plugins)
build cni/loopback "$cni" "$tools/node" env CGO_ENABLED=0 \
  go build -trimpath -ldflags "-s -w" -o "$out/cni/loopback.tmp" github.com/containernetworking/plugins/plugins/main/loopback

# NVIDIA's container toolkit, at the version gpuadmit's go.mod pins (nvcdi):
# nvidia-container-runtime, registered in containerd by the tests that need
# it (cdi mode only: legacy mode execs nvidia-container-cli, which is
# libnvidia-container, C, and not built here), and nvidia-cdi-hook, which
# the CDI specs' hooks run. Both link go-nvml, which dlopens NVML (cgo).
ctk=$(mod github.com/NVIDIA/nvidia-container-toolkit)
for c in nvidia-container-runtime nvidia-cdi-hook; do
  build "$c" "$ctk" "$tools/node" env CGO_ENABLED=1 \
    go build -trimpath -ldflags "-s -w -X github.com/NVIDIA/nvidia-container-toolkit/internal/info.version=${ctk#v}" -o "$out/$c.tmp" "github.com/NVIDIA/nvidia-container-toolkit/cmd/$c"
done

# The pause binary changes with its source, so its version is the source's hash.
build pause "$(sha256sum "$root/test/e2e/node/pause/main.go" | cut -c1-16)" "$root" env CGO_ENABLED=0 \
  go build -trimpath -ldflags "-s -w" -o "$out/pause.tmp" ./test/e2e/node/pause
echo "$out"
