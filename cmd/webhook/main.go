// Command webhook is gpuadmit's admission server (image entrypoint
// /gpuadmit-webhook): flags become webhook.Options, then webhook.Run.
package main

import (
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gpuadmit/gpuadmit/pkg/webhook"
)

func main() {
	var o webhook.Options
	var role, pick string
	flag.StringVar(&role, "role", string(webhook.RoleAll), "what this process runs: webhook (admission reviews only), controller (the quota and claim-template reconcilers only) or all (both, for a development run)")
	flag.StringVar(&o.Policies, "policies", "", "policy directory or OPA bundle (.tar.gz), watched for changes; default: the embedded default policies")
	flag.DurationVar(&o.PolicyInterval, "policy-poll-interval", 0, "how often the policy path is checked besides file events (default 10s)")
	flag.DurationVar(&o.EvalTimeout, "eval-timeout", 0, "time budget of one policy evaluation (default 250ms); keep it well inside the webhook's timeoutSeconds")
	flag.StringVar(&o.CertDir, "cert-dir", "", "directory with tls.crt and tls.key, reloaded when they change (default /tmp/k8s-webhook-server/serving-certs)")
	flag.StringVar(&o.RecordKeyDir, "record-key-dir", "", "directory with the keys that seal gpuadmit's record (files current and optional previous, the Secret gpuadmit-record-key mounted), reloaded when they change; empty seals nothing")
	flag.DurationVar(&o.SealWindow, "seal-window", 0, "how long a pod's own seal is taken as it stands, for the API server's reinvocation of the same request; later the pod is decided again (default 90s: the API server's default --request-timeout of 60s plus clock skew; keep it above the API server's --request-timeout)")
	flag.StringVar(&o.Host, "host", "", "address the webhook listens on (default all)")
	flag.IntVar(&o.Port, "port", 9443, "webhook port")
	flag.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", `Prometheus /metrics address; "0" disables; fd:N serves on the listening socket inherited as descriptor N`)
	flag.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "/healthz and /readyz address; fd:N serves on the listening socket inherited as descriptor N")
	flag.StringVar(&o.PprofAddr, "pprof-bind-address", "", `Go's /debug/pprof address (for profiling); empty or "0" serves none; fd:N serves on the listening socket inherited as descriptor N`)
	flag.BoolVar(&o.LeaderElection, "leader-elect", false, "run the reconcilers on one replica only, elected with a Lease (ignored by --role=webhook)")
	flag.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the Lease (default: the namespace the replica runs in)")
	flag.StringVar(&o.SchedulerLeaseNamespace, "scheduler-lease-namespace", "", "namespace of gpuadmit-scheduler's Lease and of the record of the pools it may own (default: the namespace the replica runs in)")
	flag.BoolVar(&o.PodEvents, "pod-events", false, "also record a GPUAdmitted Event for every pod gpuadmit admits (denials, warnings and fallbacks always get one); each is one more API write per pod create")
	flag.BoolVar(&o.NoDRAAlternatives, "no-dra-alternatives", false, "place every pod on one pool, DRA pools included, instead of giving a pod whose candidates span several DRA pools a claim with firstAvailable alternatives; for clusters without the DRAPrioritizedList feature")
	flag.StringVar(&pick, "pool-pick", string(webhook.PickExpected), "how a pod placed on one pool (device-plugin and extended-resource pools, every pool with --no-dra-alternatives) gets its pool: expected (the candidate with room whose GPU model the pods that only some models can serve are least expected to need, for its free GPU) or order (the first with room in the policy's order)")
	zopts := zap.Options{}
	zopts.BindFlags(flag.CommandLine)
	config.RegisterFlags(flag.CommandLine)
	flag.Parse()
	o.PodName, o.PodNamespace = os.Getenv("POD_NAME"), os.Getenv("POD_NAMESPACE")
	var err error
	if o.Role, err = webhook.ParseRole(role); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if o.PoolPick, err = webhook.ParsePoolPick(pick); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := inherit(&o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}

	log := zap.New(zap.UseFlagOptions(&zopts))
	ctrl.SetLogger(log)
	if limit, err := setMemoryLimit(); err != nil {
		log.Error(err, "memory limit not set")
	} else if limit > 0 {
		log.Info("Go memory limit set from the container's", "bytes", limit)
	}
	cfg, err := config.GetConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		os.Exit(1)
	}
	if err := webhook.Run(ctrl.SetupSignalHandler(), cfg, o, log); err != nil {
		log.Error(err, "webhook stopped")
		os.Exit(1)
	}
}
