#!/usr/bin/env bash
# Builds what the Kubelet suite needs on a GPU machine that has no Go and no
# network (hack/gpu/node-check.sh runs it there): the node suite's test
# binary, the shipped agent (NVML from the driver, no fake), the CUDA probe
# (hack/gpu/cudaprobe.c), and the control-plane and node binaries of
# test/e2e/.bin (make test-node builds them), each xz-compressed, in parts
# of at most $PART_MIB MiB (.hw1, .hw2, ...: a device call carries 64 MiB
# with the working tree, so the parts travel one call each, onto the same
# warm machine). Run from the repository root.
set -euo pipefail
bin=${GPUADMIT_E2E_BIN:-test/e2e/.bin/v1.37.0}
tools=${GPUADMIT_TOOLS:-.bin/tools}
part_mib=${PART_MIB:-38}
stage=$(mktemp -d /tmp/gpuadmit-hw.XXXX)
trap 'rm -rf "$stage"' EXIT
export CGO_CFLAGS=${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}

go test -c -trimpath -ldflags='-s -w' -o "$stage/node.test" ./test/e2e/node
CGO_ENABLED=1 go build -trimpath -ldflags='-s -w' -o "$stage/gpuadmit-agent" ./cmd/agent
gcc -O2 -Wall -o "$stage/cudaprobe" hack/gpu/cudaprobe.c -ldl
# Names flatten paths: bin__cni__loopback is bin/cni/loopback there.
for f in kube-apiserver kube-controller-manager kube-scheduler kubelet containerd containerd-shim-runc-v2 ctr runc pause nvidia-cdi-hook etcd cni/loopback; do
  cp -L "$bin/$f" "$stage/bin__${f//\//__}"
done
tar -C "$bin" -cf "$stage/bin__cert-manager-crds.tar" cert-manager-crds
cp -L "$tools/kustomize" "$stage/tools__kustomize"
cp -L /bin/busybox "$stage/busybox"
cp -L "$(ldconfig -p | awk '/libseccomp.so.2 .*x86-64/ {print $NF; exit}')" "$stage/libseccomp.so.2"

rm -rf .hw[0-9]*
ls -S "$stage" | while read -r f; do xz -T2 -6 -c "$stage/$f" >"$stage/$f.xz" && rm "$stage/$f"; done
# First fit, largest first.
n=0
for f in $(ls -S "$stage"); do
  size=$(stat -c %s "$stage/$f")
  placed=
  for d in $(seq 1 "$n"); do
    used=$(du -sb ".hw$d" | cut -f1)
    if [ $((used + size)) -le $((part_mib << 20)) ]; then mv "$stage/$f" ".hw$d/"; placed=1; break; fi
  done
  if [ -z "$placed" ]; then n=$((n + 1)); mkdir ".hw$n"; mv "$stage/$f" ".hw$n/"; fi
done
du -sh .hw[0-9]*
