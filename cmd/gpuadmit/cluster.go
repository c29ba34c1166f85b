package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpuadmit/gpuadmit/pkg/quota"
)

// clusterClient connects with a kubeconfig (default: $KUBECONFIG, ~/.kube/config).
func clusterClient(kubeconfig string) (client.Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return client.New(cfg, client.Options{})
}

func quotaCmd() *cobra.Command {
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "quota",
		Short: "Show, per namespace, used and hard GPU memory (GiB) in total and by model",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := clusterClient(kubeconfig)
			if err != nil {
				return err
			}
			return quota.Report(cmd.Context(), c, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig (default: $KUBECONFIG or ~/.kube/config)")
	return cmd
}

func capacityCmd() *cobra.Command {
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "capacity",
		Short: "Advertise GPU nodes' accounting capacity (real MiB of GPU memory) for quotas, until the node agent does",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := clusterClient(kubeconfig)
			if err != nil {
				return err
			}
			nodes, err := quota.PatchCapacity(cmd.Context(), c)
			for _, n := range nodes {
				fmt.Fprintln(cmd.OutOrStdout(), "patched", n)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig (default: $KUBECONFIG or ~/.kube/config)")
	return cmd
}
