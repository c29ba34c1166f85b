#!/usr/bin/env bash
# The node agent's checks on a real GPU, read only: run from the repository
# root on a GPU machine, with the agent built here first
# (go build -o .device/gpuadmit-agent ./cmd/agent). Writes everything to $OUT
# (default ./gpu-check-out). Never changes the GPU's settings (MIG mode,
# compute mode, persistence) and never resets it: MPS runs in the GPU's
# current compute mode, with its pipes in a directory of its own.
set -uo pipefail
out=${OUT:-./gpu-check-out}
mkdir -p "$out"
agent=${AGENT:-.device/gpuadmit-agent}
[ -x "$agent" ] || { [ -f "$agent.xz" ] && xz -dk "$agent.xz"; }
log() { echo "== $*" | tee -a "$out/check.log"; }

# Where the driver lives: a host's /, or a read-only /usr/local/nvidia.
root=/
if ls /usr/local/nvidia/lib64/libnvidia-ml.so.* >/dev/null 2>&1; then root=/usr/local/nvidia; fi
export PATH=$root/bin:/usr/local/nvidia/bin:$PATH
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:$root/lib64:/usr/local/nvidia/lib64
log "driver root $root"
{ uname -a; nvidia-smi -L; nvidia-smi --query-gpu=name,memory.total,driver_version,compute_mode,mig.mode.current --format=csv; ls -l /dev/nvidia* ; ls $root ; command -v nvidia-cuda-mps-control nvidia-cdi-hook; } >"$out/env.txt" 2>&1

log "discovery"
timeout 60 "$agent" --discover --output yaml >"$out/discover.yaml" 2>"$out/discover.err"; echo "rc=$?" | tee -a "$out/check.log"

log "CDI specs from the driver root"
timeout 60 "$agent" --print-cdi --output=json --driver-root="$root" --dev-root=/ >"$out/cdi.json" 2>"$out/cdi.err"; echo "rc=$?" | tee -a "$out/check.log"
# Everything the spec names must be on this host: device nodes as character
# devices, every mount's host path.
python3 - "$out/cdi.json" <<'PY' | tee -a "$out/check.log"
import json, os, stat, sys
try:
    spec = json.load(open(sys.argv[1]))
except Exception as e:
    sys.exit(f"no spec: {e}")
edits = [spec.get("containerEdits", {})] + [d.get("containerEdits", {}) for d in spec.get("devices", [])]
nodes = [n.get("hostPath") or n["path"] for e in edits for n in e.get("deviceNodes", []) or []]
mounts = [m["hostPath"] for e in edits for m in e.get("mounts", []) or []]
hooks = sorted({" ".join(h.get("args", [])[:2]) for e in edits for h in e.get("hooks", []) or []})
bad = [n for n in nodes if not (os.path.exists(n) and stat.S_ISCHR(os.stat(n).st_mode))]
missing = [m for m in mounts if not os.path.exists(m)]
print(f"devices {[d['name'] for d in spec.get('devices', [])]}; {len(nodes)} device nodes {nodes}; {len(mounts)} mounts; hooks {hooks}")
print(f"device nodes that are not character devices here: {bad}; mounts whose host path is missing: {missing}")
PY

log "MPS: the agent as the control daemon"
mps=$(mktemp -d /tmp/gpuadmit-mps.XXXX)
"$agent" --mode=mps-control --mps-root="$mps" --shares-per-gpu=4 >"$out/mps-agent.log" 2>&1 &
pid=$!
for _ in $(seq 1 60); do [ -s "$mps/limits.json" ] && break; kill -0 $pid 2>/dev/null || break; sleep 0.5; done
if [ -s "$mps/limits.json" ]; then
  cp "$mps/limits.json" "$out/mps-limits.json"
  limit=$(python3 -c 'import json,sys; print(list(json.load(open(sys.argv[1])).values())[0])' "$mps/limits.json")
  log "limit ${limit} MiB per client"
  timeout 400 python3 hack/gpu/mps_check.py "$mps/pipe" "$limit" | tee "$out/mps-check.jsonl"
  (echo get_server_list | CUDA_MPS_PIPE_DIRECTORY=$mps/pipe timeout 10 nvidia-cuda-mps-control) >>"$out/mps-agent.log" 2>&1
else
  log "the control mode set no limits (see mps-agent.log)"
fi
kill -TERM $pid 2>/dev/null; wait $pid; echo "agent rc=$?" | tee -a "$out/check.log"
sleep 1; pgrep -a nvidia-cuda-mps >>"$out/check.log" 2>&1 || echo "no MPS process left" | tee -a "$out/check.log"
cp -r "$mps/log" "$out/mps-daemon-log" 2>/dev/null
true
