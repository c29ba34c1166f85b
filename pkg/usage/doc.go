// Package usage says where a cluster's GPUs go: per pool, model, mode and
// namespace, the GPU memory (real MiB, and GPUs of the pool's model) that
// the pools have, that bound pods hold (by form: MIG slice, share, whole
// GPU, time-sliced replica), that is free, and that is stranded — free but
// usable by no pending pod and no typical size of the policy data, given
// the nodes' free CPU and memory; the placement score's fragmentation
// measure (allocator.Fragmentation) over the workload the pools' pods
// make; the pods waiting, by a fixed set of reasons; the namespaces' quota
// headroom; and, where the GPU of each allocation is known (DRA), the
// allocation of each GPU under the UUID DCGM's exporter names it by.
//
// Compute turns one snapshot of the caches (Input) into a Report; a
// Collector exports the report as Prometheus series, only while its
// process leads. docs/metrics.md defines each figure and states the series
// budget; deploy/prometheus holds the rules that join the series with
// DCGM's and turn them into cost.
package usage
