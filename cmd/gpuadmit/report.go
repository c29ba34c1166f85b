package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/gpuadmit/gpuadmit/pkg/report"
	"github.com/gpuadmit/gpuadmit/pkg/usage"
)

func reportCmd() *cobra.Command {
	var kubeconfig, nodes, pods, policies, output string
	var prices map[string]string
	cmd := &cobra.Command{
		Use:   "report [--nodes NODES.yaml [--pods PODS.yaml]] [-o table|json|html]",
		Short: "Show where the GPUs go: capacity, allocated, free, stranded and pending GPU memory by pool and namespace, and cost",
		Long: "Compute the figures gpuadmit's usage metrics export (docs/metrics.md), once: against the cluster of\n" +
			"the kubeconfig, or offline from --nodes (kubectl get nodes -o yaml) and --pods (kubectl get\n" +
			"pods,resourcequotas -A -o yaml; ResourceClaims and ResourceSlices too, for DRA nodes). Only\n" +
			"gpuadmit's pods (label gpuadmit.io/managed=true) count, as for the metrics. Prices and typical\n" +
			"sizes come from data.gpuadmit.usage of --policies (default: the embedded policies); --price\n" +
			"sets or overrides a model's price per GPU-hour.\n\n" +
			"-o table prints GiB for a terminal; -o json every figure in MiB; -o html one page with inline\n" +
			"SVG bar charts and no external asset, for a weekly review.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if pods != "" && nodes == "" {
				return fmt.Errorf("--pods needs --nodes")
			}
			cfg, err := report.Config(cmd.Context(), policies)
			if err != nil {
				return err
			}
			if err := setPrices(&cfg, prices); err != nil {
				return err
			}
			var in usage.Input
			if nodes != "" {
				in, err = report.Files(nodes, pods, cfg)
			} else {
				c, cerr := clusterClient(kubeconfig)
				if cerr != nil {
					return cerr
				}
				in, err = report.Cluster(cmd.Context(), c, cfg)
			}
			if err != nil {
				return err
			}
			return report.Write(cmd.OutOrStdout(), output, report.Of(usage.Compute(in)))
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig (default: $KUBECONFIG or ~/.kube/config); unused with --nodes")
	cmd.Flags().StringVar(&nodes, "nodes", "", "offline: Nodes as a YAML stream (kubectl get nodes -o yaml)")
	cmd.Flags().StringVar(&pods, "pods", "", "offline: Pods, ResourceQuotas, ResourceClaims and ResourceSlices as a YAML stream")
	cmd.Flags().StringVar(&policies, "policies", "", "policy directory whose data.gpuadmit.usage gives prices and typical sizes; default: the embedded policies")
	cmd.Flags().StringToStringVar(&prices, "price", nil, "price per GPU-hour of a catalog model, MODEL=PRICE (repeatable; overrides the policy data)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table, json or html")
	return cmd
}

// setPrices sets the --price flags' prices in cfg.
func setPrices(cfg *usage.Config, prices map[string]string) error {
	for model, s := range prices {
		p, err := strconv.ParseFloat(s, 64)
		if err != nil || p < 0 {
			return fmt.Errorf("--price %s=%s: want a price that is a number, not negative", model, s)
		}
		if cfg.PricePerGPUHour == nil {
			cfg.PricePerGPUHour = map[string]float64{}
		}
		cfg.PricePerGPUHour[model] = p
	}
	return nil
}
