package dra

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpuadmit/gpuadmit/pkg/agent"
)

// Run is the agent in DRA mode on a real node: NVML from the driver, the
// API server from cfg, the kubelet's plugin directories from o.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	lib, shutdown, err := agent.OpenNVML()
	if err != nil {
		return err
	}
	defer shutdown()
	nodes, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("API client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("API client: %w", err)
	}
	o.ProfileNames, o.MIGUUIDs = agent.NVMLProfileName, ReadMIGUUIDs
	return New(lib, nodes, kube, o).Run(ctx)
}
