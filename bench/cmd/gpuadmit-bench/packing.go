package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuadmit/gpuadmit/bench/packing"
)

// packingCmd replays the FGD study (ATC'23) on the Alibaba openb trace with
// one placement policy.
func packingCmd() *cobra.Command {
	s := packing.Study{Trace: "../../shared/data/openb", Workload: "default", Policy: "fgd", Seed: 42}
	var output, checksums string
	cmd := &cobra.Command{
		Use:   "packing --trace DIR --workload NAME --policy NAME --seed N -o json",
		Short: "Pack a trace workload into the trace cluster with one policy and print allocation by arrived workload",
		Long: "Pack a trace workload (inflated to 130% of GPU capacity, shuffled by --seed) into the trace's\n" +
			"GPU cluster, pods arriving one by one and never leaving, and print one JSON object with the\n" +
			"GPU allocated and unallocated (% of capacity) every 5% of arrived workload from 50% to 130%\n" +
			"and the decision time per pod. Policies: " + strings.Join(packing.Policies, ", ") + " (gpuadmit's own);\n" +
			"variants: " + strings.Join(packing.Variants, ", ") + " (product: the product's path on DRA pools,\n" +
			"the default policies' alternatives then gpuadmit-scheduler's score; pinned*: the webhook pins one model;\n" +
			"product+MOD+…: the product's path with gpuadmit-scheduler's departures from it, MOD one of online, kinds,\n" +
			"blind, names, stepN (N milli-GPU a step down the alternatives; step0: none), or plugin for the first four).\n" +
			"The trace files are checked against --checksums first (docs/trace.md).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "json" {
				return fmt.Errorf("-o %q: only json is supported", output)
			}
			if err := verifyTrace(s.Trace, checksums, packing.TraceFiles(s.Cluster, s.Workload)); err != nil {
				return err
			}
			res, err := packing.RunStudy(s)
			if err != nil {
				return err
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
		},
	}
	f := cmd.Flags()
	f.StringVar(&s.Trace, "trace", s.Trace, "openb trace directory (relative to the working directory)")
	f.StringVar(&checksums, "checksums", "", checksumsUsage)
	f.StringVar(&s.Cluster, "cluster", packing.NodeFile, "node list in the trace directory")
	f.StringVar(&s.Workload, "workload", s.Workload, "pod list: default, gpushare40, multigpu20, … or a file name")
	f.StringVar(&s.Policy, "policy", s.Policy, strings.Join(append(slices.Clone(packing.Policies), packing.Variants...), ", "))
	f.Uint64Var(&s.Seed, "seed", s.Seed, "seed of the workload resampling and the policy (the study uses 42…51)")
	f.IntVar(&s.Nodes, "nodes", 0, "keep a sample of this many nodes, drawn by --seed as `replay --nodes` draws it (0: all)")
	f.StringVarP(&output, "output", "o", "json", "json (one object)")
	return cmd
}
