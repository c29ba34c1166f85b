package webhook

import (
	"net"
	"time"

	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// Options configure Run. The zero value serves the embedded policies on the
// default ports with certificates from controller-runtime's default directory.
type Options struct {
	// Role is which parts run: RoleWebhook serves reviews, RoleController
	// runs the reconcilers; empty means RoleAll, both in one process (a
	// development run; a deployment runs the two as separate Deployments
	// under separate ServiceAccounts).
	Role Role
	// Policies is a policy directory or an OPA bundle (.tar.gz); empty means the embedded default set.
	Policies string
	// PolicyInterval is how often the policy path is checked besides file events; zero means 10s.
	PolicyInterval time.Duration
	// EvalTimeout bounds one policy evaluation; zero means
	// policy.DefaultEvalTimeout (250ms), well inside the webhook's
	// timeoutSeconds.
	EvalTimeout time.Duration
	// CertDir holds tls.crt and tls.key; empty means /tmp/k8s-webhook-server/serving-certs.
	CertDir string
	// Host and Port are where the webhook listens; Port zero means 9443.
	Host string
	Port int
	// MetricsAddr serves /metrics; empty means ":8080", "0" disables it.
	MetricsAddr string
	// ProbeAddr serves /healthz and /readyz; empty means ":8081".
	ProbeAddr string
	// ProbeListener, when set, serves /healthz and /readyz instead of
	// ProbeAddr, and Run closes it when it returns: a caller that must know the port before
	// the replica starts (several replicas in one process, tests beside
	// others) binds port 0 itself and hands the listener over, where
	// choosing a free port and binding it later could lose it to another
	// process meanwhile. Nil listens on ProbeAddr.
	ProbeListener net.Listener
	// MetricsListener, when set, serves /metrics instead of MetricsAddr,
	// and Run closes it when it returns: a listener its caller bound (or
	// inherited, cmd/webhook's --metrics-bind-address=fd:N), for the reason
	// ProbeListener gives. Nil listens on MetricsAddr.
	MetricsListener net.Listener
	// PprofAddr serves Go's /debug/pprof; empty or "0" serves none.
	PprofAddr string
	// PprofListener, when set, serves /debug/pprof instead of PprofAddr,
	// and Run closes it when it returns, as MetricsListener. Nil listens on
	// PprofAddr.
	PprofListener net.Listener
	// PodName and PodNamespace name this replica, for Events about policy loads; empty records none.
	PodName, PodNamespace string
	// PodEvents also records a GPUAdmitted Event for every pod gpuadmit
	// admits; false (the default, as Kyverno does for its successes) records
	// Events only for denials, warnings and fallbacks. Each is one more write
	// to the API server and etcd per pod create (docs/benchmarks.md measures
	// it), and the decision annotation already records every decision.
	PodEvents bool
	// RecordKeyDir holds the keys that seal gpuadmit's record (files current
	// and, during a rotation, previous: the Secret gpuadmit-record-key
	// mounted), reloaded every PolicyInterval. Empty, or no current file,
	// seals nothing: a pod that comes back (reinvocation) is decided again
	// and denied when the nodes or the policy changed meanwhile, and so are
	// the pods of a Kueue Job whose template gpuadmit decided.
	RecordKeyDir string
	// SealWindow is how long a pod's own seal is taken as it stands (the
	// API server's reinvocation of the request that sealed it); past it a
	// pod that comes back is decided again. Zero means
	// mutate.DefaultSealWindow (90s: the API server's default
	// --request-timeout of 60s, plus clock skew between replicas); raise it
	// with the API server's --request-timeout.
	SealWindow time.Duration
	// NoDRAAlternatives places every pod on one pool, DRA pools included
	// (mutate.MutatorOptions.NoAlternatives): for clusters without the
	// prioritized list of DRA requests (feature gate DRAPrioritizedList).
	// False (the default) lets a pod whose candidates span several DRA pools
	// take them as firstAvailable alternatives, the scheduler choosing.
	NoDRAAlternatives bool
	// PoolPick is how a pod placed on one pool gets its pool: PickExpected
	// (empty means it) by the expected demand of the pods that only some
	// GPU models can serve, PickOrder as the first with room in the
	// policy's order.
	PoolPick PoolPick
	// ShutdownTimeout bounds draining in-flight reviews; zero means 30s.
	ShutdownTimeout time.Duration
	// LeaderElection makes the reconcilers run on one replica only (the
	// webhook serves on all); false runs them on every replica. A Role that
	// runs no reconciler never leader-elects. LeaderElectionNamespace holds
	// the Lease, empty meaning the namespace the replica runs in.
	LeaderElection          bool
	LeaderElectionNamespace string
	// SchedulerLeaseNamespace holds gpuadmit-scheduler's Lease and the
	// controller's record of the pools it may own (the ConfigMap
	// gpuadmit-scheduler-pools, pkg/handover), which the webhook reads and
	// the default policy follows. Empty means PodNamespace, else
	// gpuadmit-system.
	SchedulerLeaseNamespace string
}

func (o *Options) defaults() {
	if o.Role == "" {
		o.Role = RoleAll
	}
	if o.PolicyInterval <= 0 {
		o.PolicyInterval = 10 * time.Second
	}
	if o.EvalTimeout <= 0 {
		o.EvalTimeout = policy.DefaultEvalTimeout
	}
	if o.CertDir == "" {
		o.CertDir = "/tmp/k8s-webhook-server/serving-certs"
	}
	if o.SchedulerLeaseNamespace == "" {
		o.SchedulerLeaseNamespace = o.PodNamespace
	}
	if o.SchedulerLeaseNamespace == "" {
		o.SchedulerLeaseNamespace = "gpuadmit-system"
	}
	if o.Port == 0 {
		o.Port = 9443
	}
	if o.MetricsAddr == "" {
		o.MetricsAddr = ":8080"
	}
	if o.ProbeAddr == "" {
		o.ProbeAddr = ":8081"
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 30 * time.Second
	}
}
