package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/gpuadmit/gpuadmit/pkg/agent"
	"github.com/gpuadmit/gpuadmit/pkg/agent/cdi"
	"github.com/gpuadmit/gpuadmit/pkg/agent/dra"
)

// flags are the command line: the options of each mode, and what to do.
type flags struct {
	agent              agent.Options
	dra                dra.Options
	mps                agent.MPSControl
	mode, output       string
	discover, printCDI bool
	// fakeNVML is the test build's --fake-nvml (fakenvml.go); unused otherwise.
	fakeNVML string
}

// bindFlags registers every flag of the agent on the command line.
func bindFlags() *flags {
	f := &flags{}
	flag.StringVar(&f.mode, "mode", "device-plugin", "device-plugin, dra (a DRA driver, "+dra.DriverName+"), publish (GPUs and accounting only) or mps-control (the MPS control daemon, each GPU's limit one share)")
	flag.BoolVar(&f.discover, "discover", false, "print the GPUs found and what would be published, change nothing, exit")
	flag.BoolVar(&f.printCDI, "print-cdi", false, "print the CDI spec the agent would write for the node's GPUs, change nothing, exit")
	flag.StringVar(&f.output, "output", "yaml", "--discover and --print-cdi output: yaml or json")
	flag.StringVar(&f.agent.NodeName, "node-name", os.Getenv("NODE_NAME"), "the Node to publish on (default $NODE_NAME)")
	flag.StringVar(&f.agent.Resource, "resource", agent.ResourceShare, "shared-memory resource the device plugin serves")
	flag.Int64Var(&f.agent.SharesPerGPU, "shares-per-gpu", agent.DefaultSharesPerGPU,
		"devices every GPU without MIG offers, each one share: the smallest such GPU's memory / N, the same on every GPU of the node")
	flag.BoolVar(&f.agent.MPS, "mps", false, "make containers clients of the node's CUDA MPS control daemon, their memory enforced by it")
	flag.StringVar(&f.agent.MPSRoot, "mps-root", agent.DefaultMPSRoot, "the MPS control daemon's host directory (pipe/, log/, shm/)")
	flag.StringVar(&f.mps.Binary, "mps-control-binary", "nvidia-cuda-mps-control", "--mode=mps-control: the daemon's binary")
	flag.StringVar(&f.agent.PluginDir, "device-plugin-dir", agent.DefaultPluginDir, "the kubelet's device-plugin directory")
	flag.DurationVar(&f.agent.Resync, "resync", 0, "how often GPUs are rediscovered and the Node written again (default 1m)")
	flag.DurationVar(&f.agent.RecoverAfter, "recover-after", 0, "quiet time after a critical XID before a GPU is healthy again (default 5m)")
	flag.StringVar(&f.dra.Driver.DataDir, "dra-plugin-dir", dra.DefaultPluginDataDir, "--mode=dra: the driver's socket and checkpoint directory")
	flag.StringVar(&f.dra.RegistrarDir, "dra-registrar-dir", dra.DefaultRegistrarDir, "--mode=dra: the kubelet's plugin registration directory")
	flag.StringVar(&f.dra.Driver.CDIDir, "cdi-dir", dra.DefaultCDIDir, "where CDI specs are written: the node's GPUs, or in DRA mode the prepared claims")
	cdiFlags(&f.agent.CDI)
	bindNVMLFlags(f)
	flag.Int64Var(&f.dra.Driver.Devices.ShareUnitMiB, "dra-share-unit-mib", 1024, "--mode=dra: the step a claim's GPU memory is rounded up to")
	return f
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
