// Command agent is gpuadmit's node agent (image entrypoint /gpuadmit-agent,
// a DaemonSet on GPU nodes): flags become agent.Options, then agent.Run.
// With --discover it prints what NVML reports and what it would publish,
// and changes nothing.
package main

import (
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gpuadmit/gpuadmit/pkg/agent"
)

func main() {
	var o agent.Options
	discover := flag.Bool("discover", false, "print the GPUs found and what would be published, change nothing, exit")
	output := flag.String("output", "yaml", "--discover output: yaml or json")
	flag.StringVar(&o.NodeName, "node-name", os.Getenv("NODE_NAME"), "the Node to publish on (default $NODE_NAME)")
	flag.StringVar(&o.Resource, "resource", agent.ResourceShare, "shared-memory resource the device plugin serves")
	flag.Int64Var(&o.SharesPerGPU, "shares-per-gpu", agent.DefaultSharesPerGPU,
		"devices every GPU without MIG offers, each one share: the smallest such GPU's memory / N, the same on every GPU of the node")
	flag.BoolVar(&o.MPS, "mps", false, "make containers clients of the node's CUDA MPS control daemon, their memory enforced by it")
	flag.StringVar(&o.MPSRoot, "mps-root", agent.DefaultMPSRoot, "the MPS control daemon's host directory (pipe/, log/, shm/)")
	flag.StringVar(&o.PluginDir, "device-plugin-dir", agent.DefaultPluginDir, "the kubelet's device-plugin directory")
	flag.DurationVar(&o.Resync, "resync", 0, "how often GPUs are rediscovered and the Node written again (default 1m)")
	flag.DurationVar(&o.RecoverAfter, "recover-after", 0, "quiet time after a critical XID before a GPU is healthy again (default 5m)")
	zopts := zap.Options{}
	zopts.BindFlags(flag.CommandLine)
	config.RegisterFlags(flag.CommandLine)
	flag.Parse()

	if *discover {
		os.Exit(printDiscovery(o, *output))
	}
	log := zap.New(zap.UseFlagOptions(&zopts))
	ctrl.SetLogger(log)
	cfg, err := config.GetConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		os.Exit(1)
	}
	if err := agent.Run(ctrl.LoggerInto(ctrl.SetupSignalHandler(), log), cfg, o); err != nil {
		log.Error(err, "agent stopped")
		os.Exit(1)
	}
}

func printDiscovery(o agent.Options, format string) int {
	r, err := agent.DiscoverNode(o)
	if err == nil {
		err = r.Write(os.Stdout, format)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpuadmit-agent:", err)
		return 1
	}
	return 0
}
