// Command gpuadmit is gpuadmit's command line: the offline decision
// (`mutate`), policy tests (`test`), the GPU catalog (`catalog`) and where
// the GPUs go (`report`). It links no benchmark: those are gpuadmit-bench's.
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
	root.AddCommand(mutateCmd(), testCmd(), catalogCmd(), certsCmd(), quotaCmd(), capacityCmd(), reportCmd())
	if err := root.ExecuteContext(ctx); err != nil {
		os.Exit(1)
	}
}

func mutateCmd() *cobra.Command {
	var o offline.MutateOptions
	cmd := &cobra.Command{
		Use:   "mutate -f FILE|DIR|- --nodes NODES.yaml",
		Short: "Decide offline for Pods and workloads' pod templates, and print them rewritten with an explanation",
		Long: "Decide offline, as the webhook would for their pods, for every Pod, Deployment, StatefulSet,\n" +
			"DaemonSet, ReplicaSet, Job and CronJob of a file (several documents and Lists allowed), of\n" +
			"standard input (-f -) or of a directory (recursively, *.yaml, *.yml, *.json). Other kinds are\n" +
			"skipped with a note on stderr. Objects without a namespace are in --namespace's, else default.\n\n" +
			"-o yaml prints each object rewritten (a workload with its template rewritten) under comments\n" +
			"with the verdict and explanation; a denied object is printed as comments only.\n" +
			"-o json prints a JSON array, one element per Pod or pod template, in input order:\n" +
			"  {kind, namespace, name, source, allowed, message, warnings, patch, pod, explanation}\n" +
			"where patch is the JSON patch against the pod (for a workload, the pod its template makes).\n" +
			"Exits 0 whenever decisions were made, allowed or denied.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Stdin, o.Notes = cmd.InOrStdin(), cmd.ErrOrStderr()
			return offline.Mutate(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVarP(&o.PodFile, "filename", "f", "", "Pods and workloads: a file, a directory, or - for stdin (YAML or JSON)")
	cmd.Flags().StringVar(&o.NodesFile, "nodes", "", "Nodes as a YAML stream (kubectl get nodes -o yaml), with the ResourceSlices of DRA nodes (kubectl get nodes,resourceslices -o yaml)")
	cmd.Flags().StringVar(&o.NamespaceFile, "namespace", "", "the Namespace (YAML) of objects that name none; default: default, without labels")
	cmd.Flags().StringVar(&o.PoliciesDir, "policies", "", "policy directory; default: the embedded default policies")
	cmd.Flags().StringVarP(&o.Output, "output", "o", "yaml", "yaml (for people) or json (an array, one result per pod template)")
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
