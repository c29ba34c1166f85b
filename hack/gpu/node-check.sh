#!/usr/bin/env bash
# The Kubelet suite's hardware tests (test/e2e/node/hardware_test.go) on a
# GPU machine, from the parts hack/gpu/node-bundle.sh built (.hw1, .hw2,
# ... in the repository root): a real control plane, kubelet, containerd
# and runc on this machine, the shipped agent as its DaemonSet over the
# machine's own driver root, and a CUDA program in the pods. Read only as
# far as the GPU goes: it never changes MIG mode, compute mode or
# persistence, and never resets the GPU. Writes to $OUT (default
# ./gpu-node-out). Run from the repository root, as root.
set -uo pipefail
out=${OUT:-./gpu-node-out}
mkdir -p "$out"
hw=/tmp/gpuadmit-hw
rm -rf "$hw"; mkdir -p "$hw/bin/cni" "$hw/tools"
for f in .hw[0-9]*/*.xz; do
  name=$(basename "$f" .xz)
  dst="$hw/${name//__//}"
  xz -dc "$f" >"$dst" && chmod +x "$dst"
done
tar -C "$hw/bin" -xf "$hw/bin/cert-manager-crds.tar" && rm "$hw/bin/cert-manager-crds.tar"
# runc links libseccomp; a machine without it gets the bundle's.
ldconfig -p | grep -q 'libseccomp.so.2 ' || { cp "$hw/libseccomp.so.2" /usr/lib/x86_64-linux-gnu/ && ldconfig; }

# The kubelet and runc need a cgroup hierarchy; mount cgroup v2 where none is.
mountpoint -q /sys/fs/cgroup || mount -t cgroup2 none /sys/fs/cgroup

root=/
if ls /usr/local/nvidia/lib64/libnvidia-ml.so.* >/dev/null 2>&1; then root=/usr/local/nvidia; fi
{
  date -u; uname -a; id
  "$root/bin/nvidia-smi" --query-gpu=name,uuid,memory.total,driver_version,compute_mode,mig.mode.current --format=csv
  echo "--- mounts"; cat /proc/self/mountinfo
  echo "--- cgroup"; stat -fc %T /sys/fs/cgroup; cat /proc/self/cgroup
  echo "--- filesystems"; cat /proc/filesystems
  echo "--- ports"; (ss -ltn || netstat -ltn) 2>&1 | head -30
  echo "--- /dev"; ls -l /dev/nvidia*
  echo "--- tools"; command -v ldconfig ldd mount xz tar ip iptables; ls -l /sbin/ldconfig*
  echo "--- hw"; ls -lR "$hw" | head -40
} >"$out/env.txt" 2>&1

export GPUADMIT_E2E_BIN=$hw/bin GPUADMIT_TOOLS=$hw/tools GPUADMIT_BUSYBOX=$hw/busybox \
  GPUADMIT_AGENT_BIN=$hw/gpuadmit-agent GPUADMIT_CUDAPROBE=$hw/cudaprobe \
  GPUADMIT_HW_DRIVER_ROOT=$root GPUADMIT_REQUIRE_E2E=1
(cd test/e2e/node && timeout "${TEST_TIMEOUT:-420}" "$hw/node.test" -test.run "${RUN:-KubeletHardware}" -test.v -test.timeout "${TEST_TIMEOUT:-420}s") >"$out/test.log" 2>&1
echo "rc=$?" >>"$out/test.log"
tail -c 6000 "$out/test.log"
# The node's logs stay only when a test failed (TestMain removes them otherwise).
for d in /tmp/gpuadmit-node-logs-*; do [ -d "$d" ] && tar -C "$d" -czf "$out/node-logs.tgz" . ; done
true
