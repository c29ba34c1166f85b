// Package intent reads the GPU requests of a pod, in whichever dialect its
// author wrote them (gpuadmit's own resources, nvidia.com/gpu, MIG, HAMi,
// Alibaba gpushare, KAI annotations, Volcano vGPU, and gpuadmit's
// DeviceClasses by their implicit extended resource names
// deviceclass.resource.kubernetes.io/<class>), into one normalized Request
// per container, plus the pod-level hints the policy may read.
//
// Read validates as it reads: a request that is malformed, contradictory or
// out of range comes back as a field.ErrorList whose paths point at the
// offending key and whose details name the container and what would be
// accepted. The package imports nothing of the project and nothing of
// client-go, so the webhook, the command line and the benchmarks share it.
package intent
