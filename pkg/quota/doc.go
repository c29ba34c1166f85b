// Package quota turns namespace GPU quotas declared in Git, next to the
// policies (data.gpuadmit.quotas), into ResourceQuota objects the API server
// enforces race-free: GPU memory in MiB across MIG slices, shares and whole
// GPUs (gpuadmit.io/gpu-memory-mib), per GPU model (gpuadmit.io/<model>-mib),
// and optionally MIG slices per profile and whole-GPU counts. It also
// computes and patches the accounting capacity of GPU nodes until the node
// agent does it, and reports usage for `gpuadmit quota`.
package quota
