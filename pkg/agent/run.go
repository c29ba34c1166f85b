package agent

import (
	"context"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/client-go/rest"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Run is the agent on a real node: NVML from the driver, the API server from
// cfg, the kubelet's PodResources socket from o.
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
	conn, err := grpc.NewClient("unix://"+o.PodResourcesSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("kubelet pod resources %s: %w", o.PodResourcesSocket, err)
	}
	defer conn.Close()
	o.ProfileNames = NVMLProfileName
	return New(lib, nodes, podresourcesv1.NewPodResourcesListerClient(conn), o).Run(ctx)
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

// openNVML loads and initializes the driver's NVML.
func openNVML() (nvml.Interface, func(), error) {
	lib := nvml.New()
	if err := nvmlError("init", lib.Init()); err != nil {
		return nil, nil, fmt.Errorf("%w (is the NVIDIA driver installed and libnvidia-ml.so.1 visible?)", err)
	}
	return lib, func() { _ = lib.Shutdown() }, nil
}
