// Package perf runs gpuadmit-scheduler in Kubernetes' own scheduler
// benchmark, k8s.io/kubernetes/test/integration/scheduler_perf ("the
// harness"): an in-process kube-apiserver on etcd, the scheduler under test
// with GPUAdmit registered out of tree, and a workload in the harness's
// configuration format (testdata/performance-config.yaml) that is
// gpuadmit's: nodes with gpuadmit's node annotation and labels, the
// ResourceSlices its DRA driver publishes for them (consumable-capacity
// shares of whole GPUs, MIG instances), its DeviceClasses, and pods with
// its claim templates, the shares and the prioritized lists of
// alternatives its webhook writes.
//
// The same workload runs under the stock profile and under GPUAdmit's
// (deploy/scheduler/config.yaml), each at percentageOfNodesToScore 100 and
// at the default, one after the other in one run. Everything is in the
// package's tests:
//
//	cd scheduler && go test ./perf -run '^$' -bench 'BenchmarkPerfScheduling/.*/500Nodes' -benchtime=1x -timeout=2h
//
// prints, per configuration, the harness's SchedulingThroughput and
// attempt duration, and GPUAdmit's Score calls per pod and its time per
// scheduling cycle, counted by a wrapper of the plugin (countingPlugin);
// a GPUAdmit run without Score calls fails. TestSmoke runs the shipped
// configuration at 50 nodes as part of go test ./... . testdata is
// generated from gpuadmit's own code (go test ./perf -run TestTestdata
// -update) and checked against it.
package perf
