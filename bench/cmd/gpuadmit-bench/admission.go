package main

import (
	"github.com/spf13/cobra"

	"github.com/gpuadmit/gpuadmit/bench/admission"
)

func admissionCmd() *cobra.Command {
	var o admission.Options
	var out string
	cmd := &cobra.Command{
		Use:   "admission [--levels 10,50,200] [--pods N] [--nodes 1000] [--out DIR]",
		Short: "Measure pod Create latency with no webhook, a no-op webhook, gpuadmit and OPA on a real control plane",
		Long: "Start kube-apiserver and etcd (test/e2e/.bin, built by hack/e2e-binaries.sh) with fake GPU nodes,\n" +
			"then, at each level of concurrent clients, create --pods pods per configuration in --rounds rounds,\n" +
			"configurations interleaved: none, noop (a controller-runtime webhook that allows), patch (the same\n" +
			"server answering with one annotation added: the least a mutating webhook costs), gpuadmit (default\n" +
			"policies) and opa (`opa run --server`, from hack/tools.sh, with an equivalent Rego policy).\n" +
			"Each webhook server is a process of its own: gpuadmit is cmd/webhook (built into the log directory\n" +
			"unless --webhook-binary names one), the no-op webhook this command's noop-webhook subcommand.\n" +
			"--mix picks the pods: shapes (12 in turn), template (all alike) or distinct (no two alike to the policy).\n" +
			"Prints a markdown table; --out also writes results.json and latency.png.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Progress = cmd.ErrOrStderr()
			rep, err := admission.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			return report(cmd, rep, out)
		},
	}
	f := cmd.Flags()
	f.IntSliceVar(&o.Levels, "levels", []int{10, 50, 200}, "numbers of concurrent clients")
	f.IntVar(&o.Pods, "pods", 3000, "pods per configuration and level, over all rounds")
	f.IntVar(&o.Rounds, "rounds", 3, "rounds per level; each runs every configuration once, in rotating order")
	f.IntVar(&o.Nodes, "nodes", 1000, "fake GPU nodes")
	f.StringSliceVar(&o.Configs, "configs", admission.Configurations, "configurations: none, noop, patch, gpuadmit, opa, and replay (the no-op server answering with gpuadmit's own patch; --mix template only)")
	f.StringVar((*string)(&o.Mix), "mix", string(admission.MixShapes), "pod mix: shapes, template, distinct or labeled")
	f.StringVar(&o.WebhookPprof, "webhook-pprof", "", "serve gpuadmit's /debug/pprof on this address (e.g. 127.0.0.1:6060) to profile it during the run")
	f.StringVar(&o.WebhookBinary, "webhook-binary", "", "a built cmd/webhook to run as gpuadmit (default: built from the repository into the log directory)")
	f.StringVar(&out, "out", "", "directory for results.json and latency.png")
	f.StringVar(&o.OPA, "opa", "", "opa binary (default: .bin/tools/opa from hack/tools.sh, else $PATH)")
	f.StringVar(&o.BinDir, "bin-dir", "", "control-plane binaries (default: test/e2e/.bin/v1.37.0)")
	f.BoolVar(&o.PodEvents, "pod-events", false, "run gpuadmit with a GPUAdmitted Event per admitted pod (the webhook's --pod-events, off by default)")
	f.StringVar(&o.ProfileDir, "cpuprofile-dir", "", "write a CPU profile of this process (the clients) for every measured round here")
	f.IntVar(&o.APIServerProfile, "apiserver-profile-seconds", 0, "with --cpuprofile-dir, also profile kube-apiserver over the first this many seconds of every measured round")
	f.StringVar(&o.LogDir, "log-dir", "", "keep the components' logs here (default: a temporary directory, removed on success)")
	return cmd
}
