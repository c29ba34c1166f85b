"""Checks, on a real GPU, that gpuadmit's MPS control mode holds each client
process to its limit: run by hack/gpu/check.sh with the control daemon up.

Each probe is a fresh process (MPS applies the daemon's default limit when a
client connects), allocating with PyTorch's plain cudaMalloc path. Prints one
JSON line per probe."""
import json
import os
import subprocess
import sys

PROBE = r"""
import sys, torch
mib = int(sys.argv[1])
try:
    x = torch.empty(mib * 2**20, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    print("ok", free >> 20, total >> 20)
except Exception as e:  # torch.OutOfMemoryError or a CUDA error
    print("fail", type(e).__name__, str(e).splitlines()[0][:200])
"""


def probe(name, mib, env):
    r = subprocess.run([sys.executable, "-c", PROBE, str(mib)], env=env, capture_output=True, text=True, timeout=120)
    out = (r.stdout.strip().splitlines() or [""])[-1]
    print(json.dumps({"probe": name, "mib": mib, "result": out, "rc": r.returncode, "stderr": r.stderr.strip()[-300:]}), flush=True)
    return out.startswith("ok")


def main():
    pipe, limit = sys.argv[1], int(sys.argv[2])
    base = dict(os.environ)
    base.pop("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", None)
    mps = dict(base, CUDA_MPS_PIPE_DIRECTORY=pipe)
    no_mps = dict(base, CUDA_MPS_PIPE_DIRECTORY="/tmp/no-mps-here")
    raised = dict(mps, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="0=1000G")
    results = {
        # Well inside the limit: the CUDA context is not counted against it here.
        "within": probe("within the limit", limit - 4096, mps),
        "above": probe("above the limit", limit + 4096, mps),
        "raised": probe("above, the client raising its own variable", limit + 4096, raised),
        "without_mps": probe("above the limit, no MPS daemon", limit + 4096, no_mps),
    }
    held = results["within"] and not results["above"] and not results["raised"] and results["without_mps"]
    print(json.dumps({"summary": results, "limit_holds": held}), flush=True)


if __name__ == "__main__":
    main()
