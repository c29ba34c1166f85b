package main

import (
	"github.com/spf13/cobra"

	"github.com/gpuadmit/gpuadmit/bench/packing"
	"github.com/gpuadmit/gpuadmit/bench/replay"
)

// replayCmd replays a trace workload through a real kube-apiserver and
// scheduler, for each scheduler configuration.
func replayCmd() *cobra.Command {
	o := replay.Options{Trace: "../../shared/data/openb", Workload: "default", Seed: 42}
	var out, checksums string
	cmd := &cobra.Command{
		Use:   "replay [--workload default] [--seed 42] [--nodes N] [--configs default,mostallocated,gpuadmit] [--out DIR]",
		Short: "Replay a trace workload through a real kube-apiserver and scheduler and compare unallocated GPU with the simulator",
		Long: "Start etcd and kube-apiserver (test/e2e/.bin) once per scheduler configuration, add the trace's nodes\n" +
			"as fake nodes with gpuadmit's DRA ResourceSlices, create the workload's claims and pods one by one in\n" +
			"trace order up to 100% arrived, and read back where each pod and share went: unallocated GPU % as\n" +
			"bench packing counts it, next to the simulator's figures for the same pods. Configurations: default\n" +
			"(stock kube-scheduler), mostallocated (stock, NodeResourcesFit MostAllocated with the GPU resource),\n" +
			"gpuadmit (gpuadmit-scheduler, deploy/scheduler's profile). The product's path, where pods are written as a\n" +
			"user writes them (gpuadmit.io/gpu: 300m, the trace's gpu_spec as a model hint) and go through gpuadmit's\n" +
			"webhook and controller with the default policies: webhook-gpuadmit (DRA alternatives, gpuadmit-scheduler),\n" +
			"webhook-default (DRA alternatives, stock scheduler), webhook-onepool (--no-dra-alternatives\n" +
			"--pool-pick=order, stock scheduler), webhook-pick (--no-dra-alternatives --pool-pick=expected, stock\n" +
			"scheduler). Also gpuadmit's usage figures (stranded,\n" +
			"fragmentation, allocated, pending: pkg/usage on the replay cluster's objects) at every 2% of arrival.\n" +
			"Prints markdown; --out also writes results.json, usage.csv and summary.md. bench/replay/doc.go says\n" +
			"how pods and GPUs are represented.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := verifyTrace(o.Trace, checksums, packing.TraceFiles("", o.Workload)); err != nil {
				return err
			}
			o.Progress = cmd.ErrOrStderr()
			rep, err := replay.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			return report(cmd, rep, out)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Trace, "trace", o.Trace, "openb trace directory (relative to the working directory)")
	f.StringVar(&checksums, "checksums", "", checksumsUsage)
	f.StringVar(&o.Workload, "workload", o.Workload, "pod list: default, gpushare40, multigpu20, … or a file name")
	f.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the workload resampling and of the simulator's tie order")
	f.IntVar(&o.Nodes, "nodes", 0, "replay on a seeded sample of this many of the trace's nodes (0: all 1,213)")
	f.StringSliceVar(&o.Configs, "configs", replay.Configurations, "configurations: default, mostallocated, gpuadmit, webhook-gpuadmit, webhook-default, webhook-onepool, webhook-pick")
	f.StringVar(&out, "out", "", "directory for results.json, usage.csv and summary.md")
	f.StringVar(&o.BinDir, "bin-dir", "", "control-plane binaries (default: test/e2e/.bin/v1.37.0)")
	f.StringVar(&o.Scheduler, "scheduler", "", "gpuadmit-scheduler binary (default: $GPUADMIT_SCHEDULER_BIN, else built from scheduler/)")
	f.StringVar(&o.LogDir, "log-dir", "", "keep the components' logs here (default: a temporary directory, removed on success)")
	f.DurationVar(&o.Timeout, "timeout", 0, "bound on each configuration's scheduling (default 9m)")
	f.StringVar(&o.SchedulerWorkload, "scheduler-workload", replay.WorkloadDerived,
		"gpuadmit-scheduler's target workload: derived (from the pods it has seen, as shipped) or listed (fixed to the pod list, the simulator's knowledge)")
	f.IntVar(&o.MaxPending, "max-pending", 0, "create a pod only when at most this many of those created are neither bound nor unschedulable, so the scheduler keeps up as in a cluster (0: create as fast as the API server takes them)")
	f.StringVar(&o.SchedulerCPUs, "scheduler-cpus", "", "run the scheduler by itself on these CPUs (taskset's list: 1, 2-3) and the control plane and the replay on the others (default: all share all)")
	return cmd
}
