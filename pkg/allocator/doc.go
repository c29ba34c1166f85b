// Package allocator is gpuadmit's model of GPUs: a catalog of GPU models and
// their MIG profiles with the sizes NVML really reports (MiB, SMs, memory
// slices, instance limits and placements), and the functions that fit a
// request for memory or for a fraction of a GPU onto a MIG profile or onto
// units of a shared-memory resource. Placement of slices and shares on
// concrete GPUs, and scoring, build on these.
//
// The package imports only the standard library, so the webhook, the node
// agent and the benchmarks can all use it.
//
// # Sizes are real
//
// A profile's MemoryMiB is what NVML's GetGpuInstanceProfileInfo reports, not
// the number in its name: on an H100 80GB, 1g.10gb has 9984 MiB, so a request
// for 10240 MiB is served by 1g.20gb (20096 MiB), never by 1g.10gb. The
// catalog's H100 and H200 entries are checked, field by field, against NVML
// readings taken on real GPUs (testdata/nvml).
//
// # What a fraction of a GPU means
//
// A fraction f of a GPU (given in thousandths, "milli", as Kubernetes writes
// 500m) is measured in memory, and always rounds up:
//
//   - For MIG, f means ceil(f × the model's memory slices) memory slices; the
//     profile chosen is the smallest one that covers that many slices. On an
//     H100 (8 memory slices) 0.5 is 4 slices, which is 3g.40gb; 0.25 is 2
//     slices, which is 1g.20gb.
//   - For memory shares, f means ceil(f × the GPU's memory MiB / unit MiB)
//     units of the shared-memory resource: 0.5 of a T4 (15360 MiB) at
//     1024 MiB per unit is 8 units.
//
// A request in MiB becomes share units the same way: ceil(MiB / unit MiB).
// Rounding is never down, so a workload always gets at least what it asked.
package allocator
