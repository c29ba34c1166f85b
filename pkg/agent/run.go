package agent

import (
	"context"
	"fmt"
	"io"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpuadmit/gpuadmit/pkg/agent/cdi"
)

// Run is the agent on a real node: NVML from the driver, the API server from cfg.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	o.defaults()
	lib, shutdown, err := o.open()
	if err != nil {
		return err
	}
	defer shutdown()
	nodes, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("API client: %w", err)
	}
	o.ProfileNames = o.nvmlProfileNames()
	if !o.PublishOnly {
		o.CDI.Log = logf.FromContext(ctx).WithName("cdi")
		if o.Specs, err = cdi.New(lib, o.CDI); err != nil {
			return err
		}
	}
	return New(lib, nodes, o).Run(ctx)
}

// DiscoverNode is Discover with the driver's NVML: what `--discover` prints.
func DiscoverNode(o Options) (Report, error) {
	lib, shutdown, err := o.open()
	if err != nil {
		return Report{}, err
	}
	defer shutdown()
	o.ProfileNames = o.nvmlProfileNames()
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

// openNVML loads and initializes the driver's NVML: the libnvidia-ml.so.1
// under the driver root of c when it is not "/" and has one, else the one
// the dynamic loader finds.
func openNVML(c cdi.Options) (nvml.Interface, func(), error) {
	var opts []nvml.LibraryOption
	where := "libnvidia-ml.so.1 on the loader's path"
	if path := c.NVMLLibrary(); path != "" {
		opts, where = append(opts, nvml.WithLibraryPath(path)), path
	} else if root := c.AgentDriverRoot(); root != "/" {
		where = fmt.Sprintf("libnvidia-ml.so.1 on the loader's path, none being under driver root %s", root)
	}
	lib := nvml.New(opts...)
	if err := nvmlError("init", lib.Init()); err != nil {
		return nil, nil, fmt.Errorf("%w: loading %s (is the NVIDIA driver installed, and --driver-root where it is?)", err, where)
	}
	return lib, func() { _ = lib.Shutdown() }, nil
}

// PrintCDI prints, as "yaml" or "json", the CDI spec the agent writes for
// the node's GPUs in device-plugin mode (DRA mode's claim specs carry the
// same edits): what `--print-cdi` prints. A GPU whose edits could not be
// made is left out of what is printed and named in the error.
func PrintCDI(w io.Writer, o Options, format string) error {
	spec, err := nodeCDISpec(o)
	if spec == nil {
		return err
	}
	if werr := writeAs(w, spec, format); werr != nil {
		return werr
	}
	return err
}

func nodeCDISpec(o Options) (*cdispec.Spec, error) {
	lib, shutdown, err := o.open()
	if err != nil {
		return nil, err
	}
	defer shutdown()
	gpus, err := Discoverer{NVML: lib, Names: o.nvmlProfileNames()}.Discover()
	if err != nil {
		return nil, fmt.Errorf("discover GPUs: %w", err)
	}
	g, err := cdi.New(lib, o.CDI)
	if err != nil {
		return nil, err
	}
	spec, err := g.NodeSpec(specUUIDs(gpus))
	if spec != nil {
		spec.Version, _ = cdispec.MinimumRequiredVersion(spec) // as WriteSpec writes it
	}
	return spec, err
}
