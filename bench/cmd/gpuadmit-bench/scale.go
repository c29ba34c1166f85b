package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpuadmit/gpuadmit/bench/scale"
)

func scaleCmd() *cobra.Command {
	var o scale.Options
	var out, memLimit string
	cmd := &cobra.Command{
		Use:   "scale [--steps 1000,2500,5000] [--pods 2000] [-o DIR]",
		Short: "Measure gpuadmit's webhook at 1,000 to 5,000 GPU nodes, with and without GFD label churn",
		Long: "Start etcd (8 GiB quota, compaction), kube-apiserver and gpuadmit as processes of their own, add GPU nodes\n" +
			"(plain Node objects, no kubelet: device-plugin pools and, every --dra-every-th node, DRA nodes with the\n" +
			"agent's ResourceSlices) up to each step, and measure at each: the webhook's RSS and Go heap, its cache\n" +
			"objects, inventory rebuild time, and four phases of --pods pods each (one template, all different;\n" +
			"without and with GFD's nvidia.com/gfd.timestamp rewritten on every node once per --churn-period):\n" +
			"the webhook's own review duration, memo hit rate and rebuilds. Pods are kept from step to step.\n" +
			"Writes results.md and results.json into -o (default: a new directory under the system's temp dir)\n" +
			"and prints the tables.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Progress = cmd.ErrOrStderr()
			if memLimit != "" {
				q, err := resource.ParseQuantity(memLimit)
				if err != nil || q.Sign() <= 0 {
					return fmt.Errorf("--webhook-memory-limit=%q: want a memory quantity such as 2784Mi", memLimit)
				}
				o.WebhookMemoryLimit = q.Value()
			}
			if out == "" {
				out = filepath.Join(os.TempDir(), "gpuadmit-bench-scale-"+time.Now().UTC().Format("20060102-150405"))
			}
			rep, err := scale.Run(cmd.Context(), o)
			if rep == nil {
				return err
			}
			// A run that stopped at a step still reports the steps before it.
			werr := report(cmd, rep, out)
			fmt.Fprintf(cmd.ErrOrStderr(), "results in %s\n", out)
			return errors.Join(err, werr)
		},
	}
	f := cmd.Flags()
	f.IntSliceVar(&o.Steps, "steps", []int{1000, 2500, 5000}, "numbers of GPU nodes, ascending; one control plane, grown step by step")
	f.IntVar(&o.Pods, "pods", 2000, "GPU pods per phase (four phases a step); they are kept")
	f.IntVar(&o.Clients, "clients", 10, "concurrent clients creating pods")
	f.DurationVar(&o.ChurnPeriod, "churn-period", time.Minute, "how often churn rewrites each node's GFD timestamp (GFD's default: a minute)")
	f.DurationVar(&o.ChurnWarmup, "churn-warmup", 10*time.Second, "how long churn runs before a churn phase's first pod")
	f.IntVar(&o.DRAEvery, "dra-every", 5, "every this many-th node is a DRA node; negative for none")
	f.IntVar(&o.Probes, "probes", 6, "taint changes per step that time the inventory rebuild")
	f.IntVar(&o.Fill, "fill", 0, "after the last step, create this many more pods of one template, reading memory every --fill-chunk")
	f.IntVar(&o.FillChunk, "fill-chunk", 10000, "pods between two memory readings of --fill")
	f.StringVar(&memLimit, "webhook-memory-limit", "", "the memory limit the webhook runs under (e.g. 3424Mi, what the chart sets from the formula for 5,000 nodes and 150,000 GPU pods; default: deploy/base's)")
	f.StringVar(&o.WebhookBinary, "webhook-binary", "", "a built cmd/webhook (default: built from the repository into the log directory)")
	f.StringVar(&o.BinDir, "bin-dir", "", "control-plane binaries (default: test/e2e/.bin/v1.37.0)")
	f.StringVar(&o.LogDir, "log-dir", "", "keep the components' logs here (default: a temporary directory, removed on success)")
	f.StringVarP(&out, "out", "o", "", "directory for results.md and results.json (default: under the system's temp dir)")
	return cmd
}
