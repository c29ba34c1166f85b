package agent

import (
	"context"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Run is the agent on a real node: NVML from the driver, the API server from cfg.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	o.defaults()
	lib, shutdown, err := openNVML()
	if err != nil {
		return err
	}
	defer shutdown()
	nodes, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("API client: %w", err)
	}
	o.ProfileNames = NVMLProfileName
	return New(lib, nodes, o).Run(ctx)
}

// DiscoverNode is Discover with the driver's NVML: what `--discover` prints.
func DiscoverNode(o Options) (Report, error) {
	lib, shutdown, err := openNVML()
	if err != nil {
		return Report{}, err
	}
	defer shutdown()
	o.ProfileNames = NVMLProfileName
	return Discover(lib, o)
}

// RunMPSControl is --mode=mps-control on a real node: RunMPS for the GPUs
// the driver's NVML finds, each held to one share of the device plugin's
// size (o.SharesPerGPU, which must be the plugin's).
func RunMPSControl(ctx context.Context, o Options, c MPSControl) error {
	o.defaults()
	r, err := DiscoverNode(o)
	if err != nil {
		return err
	}
	if c.Root == "" {
		c.Root = o.MPSRoot
	}
	return RunMPS(ctx, c, r.GPUs, o.SharesPerGPU)
}

// openNVML loads and initializes the driver's NVML.
func openNVML() (nvml.Interface, func(), error) {
	lib := nvml.New()
	if err := nvmlError("init", lib.Init()); err != nil {
		return nil, nil, fmt.Errorf("%w (is the NVIDIA driver installed and libnvidia-ml.so.1 visible?)", err)
	}
	return lib, func() { _ = lib.Shutdown() }, nil
}
