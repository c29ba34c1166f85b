// Command gpuadmit is gpuadmit's command line: the offline decision
// (`mutate`), policy tests (`test`) and the GPU catalog (`catalog`).
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/spf13/cobra"

	"github.com/gpuadmit/gpuadmit/pkg/offline"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	root := &cobra.Command{Use: "gpuadmit", Short: "GPU admission control for Kubernetes", SilenceUsage: true}
	root.AddCommand(mutateCmd(), testCmd(), catalogCmd(), certsCmd(), quotaCmd(), capacityCmd(), benchCmd())
	if err := root.ExecuteContext(ctx); err != nil {
		os.Exit(1)
	}
}

func mutateCmd() *cobra.Command {
	var o offline.MutateOptions
	cmd := &cobra.Command{
		Use:   "mutate -f POD.yaml --nodes NODES.yaml",
		Short: "Decide for a pod offline and print the mutated pod with an explanation",
		Long: "Decide for a pod offline and print the mutated pod with an explanation.\n" +
			"Exits 0 whenever a decision was made, allowed or denied.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return offline.Mutate(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVarP(&o.PodFile, "filename", "f", "", "the pod (YAML or JSON)")
	cmd.Flags().StringVar(&o.NodesFile, "nodes", "", "Nodes as a YAML stream (kubectl get nodes -o yaml)")
	cmd.Flags().StringVar(&o.NamespaceFile, "namespace", "", "the pod's Namespace (YAML); default: one without labels")
	cmd.Flags().StringVar(&o.PoliciesDir, "policies", "", "policy directory; default: the embedded default policies")
	cmd.Flags().StringVarP(&o.Output, "output", "o", "yaml", "yaml (for people) or json (one object)")
	return cmd
}

func testCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "test [DIR]",
		Short: "Compile a policy directory and run its tests (default: the embedded policies)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := ""
			if len(args) == 1 {
				dir = args[0]
			}
			return offline.Test(cmd.Context(), dir, cmd.OutOrStdout())
		},
	}
}

func catalogCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "catalog",
		Short: "Print the GPU models and MIG profiles gpuadmit knows, with real sizes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return offline.Catalog(cmd.OutOrStdout(), format)
		},
	}
	cmd.Flags().StringVarP(&format, "output", "o", "table", "table or json")
	return cmd
}
