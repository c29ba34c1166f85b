package dra

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gpuadmit/gpuadmit/pkg/agent"
	"github.com/gpuadmit/gpuadmit/pkg/agent/cdi"
)

// Run is the agent in DRA mode on a real node: NVML and the CDI edits from
// the driver under o.CDI's root, the API server from cfg, the kubelet's
// plugin directories from o.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	open := o.OpenNVML
	if open == nil {
		open = agent.OpenNVML
	}
	lib, shutdown, err := open(o.CDI)
	if err != nil {
		return err
	}
	defer shutdown()
	o.CDI.Log = logf.FromContext(ctx).WithName("cdi")
	if o.Driver.CDI, err = cdi.New(lib, o.CDI); err != nil {
		return err
	}
	nodes, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("API client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("API client: %w", err)
	}
	if o.ProfileNames == nil {
		o.ProfileNames = agent.NVMLProfileName
	}
	o.MIGUUIDs = ReadMIGUUIDs
	return New(lib, nodes, kube, o).Run(ctx)
}
