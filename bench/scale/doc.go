// Package scale measures gpuadmit's webhook at the size of real clusters
// (gpuadmit-bench scale): a real control plane (etcd with an 8 GiB quota
// and its own compaction, kube-apiserver, gpuadmit's webhook and
// controller as processes of their own, as deployed), GPU nodes added in
// steps (1,000, 2,500 and 5,000 by default), GPU Feature Discovery's
// label churn, and GPU pods admitted through the webhook.
//
// The nodes are plain Node objects, as bench/admission makes them, with no
// kubelet and no kwok (nothing here schedules or runs a pod): the
// device-plugin pools of bench/admission (H100 and H200 MIG mixed, A100
// MIG single, T4 memory shares, whole L40S and A100 80GB), and every
// fifth node a DRA node (H100 80GB and H200 in turn) whose ResourceSlices
// and Node annotation are built by the agent's own code (agent.Discoverer
// on fake GPUs answering as the real NVML readings, dra.Devices,
// dra.Resources, agent.NodePublisher). About 40 Node Feature Discovery
// labels are added to every node, so a node is as large in the cache as
// the memory formula's (docs/scale.md).
//
// At each step, after its nodes are in the webhook's cache, the benchmark
// reads the webhook process's memory (RSS and peak RSS from /proc, the Go
// heap after a collection from its /debug/pprof), times inventory
// rebuilds by changing a taint (what a rebuild follows), and runs four
// phases: pods of one template and all-different pods, each without and
// with churn. Churn rewrites nvidia.com/gfd.timestamp on every GPU node
// once per ChurnPeriod (a minute, as GFD does by default), in an order
// and at times jittered anew every period. Every phase reads, from the
// webhook's own /metrics, the review duration
// (gpuadmit_webhook_review_duration_seconds), the decision memo's hits
// and misses, and the inventory rebuilds by trigger. Pods are kept: each
// step's memory reading holds every GPU pod created so far.
//
// It is a benchmark: it reports and never fails on a number.
package scale
