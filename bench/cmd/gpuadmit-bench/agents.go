package main

import (
	"github.com/spf13/cobra"

	"github.com/gpuadmit/gpuadmit/bench/agents"
)

func agentsCmd() *cobra.Command {
	var o agents.Options
	cmd := &cobra.Command{
		Use:   "agents [--levels 100,500,1000] [--resync 1m] [--lose 10]",
		Short: "Measure N agents publishing (DRA mode: Node and ResourceSlices) against a real control plane",
		Long: "For each level, start etcd and kube-apiserver (test/e2e/.bin), create that many Nodes and run an agent\n" +
			"for each in this process: the shipped discovery on fake GPUs that answer as a real reading, the\n" +
			"ResourceSlice controller and the Node publisher, a client each, starts jittered over one resync.\n" +
			"Count the API server's requests (apiserver_request_total) and its process CPU in steady state, then\n" +
			"while --lose agents lose one GPU each. Prints a markdown table.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Progress = cmd.ErrOrStderr()
			levels, err := agents.Run(cmd.Context(), o)
			agents.Markdown(cmd.OutOrStdout(), levels)
			return err
		},
	}
	f := cmd.Flags()
	f.IntSliceVar(&o.Levels, "levels", []int{100, 500, 1000}, "numbers of agents, one control plane each")
	f.IntVar(&o.GPUs, "gpus", 8, "GPUs per node")
	f.StringVar(&o.Reading, "reading", "", "NVML reading the fake GPUs answer as (default: pkg/allocator/testdata/nvml/h100-80gb-hbm3-raw.txt)")
	f.DurationVar(&o.Resync, "resync", 0, "the agents' resync period (default 1m, the shipped one)")
	f.DurationVar(&o.Steady, "steady", 0, "how long to measure steady state (default two resyncs)")
	f.IntVar(&o.Lose, "lose", 10, "agents that lose one GPU in the change phase")
	f.StringVar(&o.BinDir, "bin-dir", "", "control-plane binaries (default: test/e2e/.bin/v1.37.0)")
	return cmd
}
