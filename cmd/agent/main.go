// Command agent is gpuadmit's node agent (image entrypoint /gpuadmit-agent,
// a DaemonSet on GPU nodes): flags become options, then agent.Run (a device
// plugin, --mode=device-plugin), dra.Run (a DRA driver, --mode=dra) or
// agent.RunMPSControl (the node's CUDA MPS control daemon with its limits,
// --mode=mps-control, which needs no API server).
// With --discover it prints what NVML reports and what it would publish,
// with --print-cdi the CDI spec it would write for the node's GPUs, and
// changes nothing.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gpuadmit/gpuadmit/pkg/agent"
	"github.com/gpuadmit/gpuadmit/pkg/agent/cdi"
	"github.com/gpuadmit/gpuadmit/pkg/agent/dra"
)

func main() {
	var o agent.Options
	var d dra.Options
	var m agent.MPSControl
	mode := flag.String("mode", "device-plugin", "device-plugin, dra (a DRA driver, "+dra.DriverName+"), publish (GPUs and accounting only) or mps-control (the MPS control daemon, each GPU's limit one share)")
	discover := flag.Bool("discover", false, "print the GPUs found and what would be published, change nothing, exit")
	printCDI := flag.Bool("print-cdi", false, "print the CDI spec the agent would write for the node's GPUs, change nothing, exit")
	output := flag.String("output", "yaml", "--discover and --print-cdi output: yaml or json")
	flag.StringVar(&o.NodeName, "node-name", os.Getenv("NODE_NAME"), "the Node to publish on (default $NODE_NAME)")
	flag.StringVar(&o.Resource, "resource", agent.ResourceShare, "shared-memory resource the device plugin serves")
	flag.Int64Var(&o.SharesPerGPU, "shares-per-gpu", agent.DefaultSharesPerGPU,
		"devices every GPU without MIG offers, each one share: the smallest such GPU's memory / N, the same on every GPU of the node")
	flag.BoolVar(&o.MPS, "mps", false, "make containers clients of the node's CUDA MPS control daemon, their memory enforced by it")
	flag.StringVar(&o.MPSRoot, "mps-root", agent.DefaultMPSRoot, "the MPS control daemon's host directory (pipe/, log/, shm/)")
	flag.StringVar(&m.Binary, "mps-control-binary", "nvidia-cuda-mps-control", "--mode=mps-control: the daemon's binary")
	flag.StringVar(&o.PluginDir, "device-plugin-dir", agent.DefaultPluginDir, "the kubelet's device-plugin directory")
	flag.DurationVar(&o.Resync, "resync", 0, "how often GPUs are rediscovered and the Node written again (default 1m)")
	flag.DurationVar(&o.RecoverAfter, "recover-after", 0, "quiet time after a critical XID before a GPU is healthy again (default 5m)")
	flag.StringVar(&d.Driver.DataDir, "dra-plugin-dir", dra.DefaultPluginDataDir, "--mode=dra: the driver's socket and checkpoint directory")
	flag.StringVar(&d.RegistrarDir, "dra-registrar-dir", dra.DefaultRegistrarDir, "--mode=dra: the kubelet's plugin registration directory")
	flag.StringVar(&d.Driver.CDIDir, "cdi-dir", dra.DefaultCDIDir, "where CDI specs are written: the node's GPUs, or in DRA mode the prepared claims")
	cdiFlags(&o.CDI)
	flag.Int64Var(&d.Driver.Devices.ShareUnitMiB, "dra-share-unit-mib", 1024, "--mode=dra: the step a claim's GPU memory is rounded up to")
	zopts := zap.Options{}
	zopts.BindFlags(flag.CommandLine)
	config.RegisterFlags(flag.CommandLine)
	flag.Parse()

	o.CDIDir = d.Driver.CDIDir
	if *discover || *printCDI {
		os.Exit(print(o, *printCDI, *output))
	}
	log := zap.New(zap.UseFlagOptions(&zopts))
	ctrl.SetLogger(log)
	ctx := ctrl.LoggerInto(ctrl.SetupSignalHandler(), log)
	if err := run(ctx, *mode, o, d, m); err != nil {
		log.Error(err, "agent stopped")
		os.Exit(1)
	}
}

func run(ctx context.Context, mode string, o agent.Options, d dra.Options, m agent.MPSControl) error {
	if mode == "mps-control" {
		return agent.RunMPSControl(ctx, o, m)
	}
	cfg, err := config.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	switch mode {
	case "device-plugin", "publish":
		o.PublishOnly = mode == "publish"
		return agent.Run(ctx, cfg, o)
	case "dra":
		d.NodeName, d.Resync, d.RecoverAfter, d.CDI = o.NodeName, o.Resync, o.RecoverAfter, o.CDI
		return dra.Run(ctx, cfg, d)
	}
	return fmt.Errorf("--mode %q: want device-plugin, dra, publish or mps-control", mode)
}

// cdiFlags say where the driver is, as NVIDIA's DRA driver and device plugin name them.
func cdiFlags(c *cdi.Options) {
	flag.StringVar(&c.DriverRoot, "driver-root", cdi.DefaultDriverRoot, "the NVIDIA driver's root on the host: /, /run/nvidia/driver, /usr/local/nvidia")
	flag.StringVar(&c.ContainerDriverRoot, "container-driver-root", "", "where the agent sees --driver-root (default: the same path)")
	flag.StringVar(&c.DevRoot, "dev-root", "", "the host root whose dev/ holds /dev/nvidia* (default: the driver root if it has dev/, else /)")
	flag.StringVar(&c.HookPath, "nvidia-cdi-hook-path", cdi.DefaultHookPath, "the nvidia-cdi-hook binary on the host, run by the CDI specs' hooks")
}

// print writes the discovery or the node's CDI spec to stdout.
func print(o agent.Options, spec bool, format string) int {
	var err error
	if spec {
		err = agent.PrintCDI(os.Stdout, o, format)
	} else {
		var r agent.Report
		if r, err = agent.DiscoverNode(o); err == nil {
			err = r.Write(os.Stdout, format)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpuadmit-agent:", err)
		return 1
	}
	return 0
}
