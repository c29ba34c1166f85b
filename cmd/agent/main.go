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
	"github.com/gpuadmit/gpuadmit/pkg/agent/dra"
)

func main() {
	f := bindFlags()
	zopts := zap.Options{}
	zopts.BindFlags(flag.CommandLine)
	config.RegisterFlags(flag.CommandLine)
	flag.Parse()

	if err := useNVML(f); err != nil {
		fmt.Fprintln(os.Stderr, "gpuadmit-agent:", err)
		os.Exit(1)
	}
	o, d, m := f.agent, f.dra, f.mps
	o.CDIDir = d.Driver.CDIDir
	if f.discover || f.printCDI {
		os.Exit(print(o, f.printCDI, f.output))
	}
	log := zap.New(zap.UseFlagOptions(&zopts))
	ctrl.SetLogger(log)
	ctx := ctrl.LoggerInto(ctrl.SetupSignalHandler(), log)
	if err := run(ctx, f.mode, o, d, m); err != nil {
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
		d.OpenNVML, d.ProfileNames = o.OpenNVML, o.ProfileNames
		return dra.Run(ctx, cfg, d)
	}
	return fmt.Errorf("--mode %q: want device-plugin, dra, publish or mps-control", mode)
}
