package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/gpuadmit/gpuadmit/pkg/webhook"
)

// Options say where the binaries are and how to run gpuadmit.
type Options struct {
	// BinDir holds etcd, kube-apiserver, kube-scheduler, kube-controller-manager,
	// kwok, kwok-stages/ and cert-manager-crds/, as hack/e2e-binaries.sh leaves them.
	BinDir string
	// Root is the repository root; deploy/base's webhook configuration and
	// the ValidatingAdmissionPolicy that guards gpuadmit's record are installed.
	Root string
	// Policies is the webhook's --policies; empty means the embedded set.
	Policies string
	// LogDir receives each component's log and the kubeconfig; empty means a temp dir.
	LogDir string
	// Skip names components not to start (kube-scheduler, kube-controller-manager,
	// kwok, webhook), e.g. for an admission benchmark where pods need not
	// schedule and kwok's node heartbeats would only add load; nil starts them
	// all. Without the webhook its MutatingWebhookConfiguration is not
	// installed either, so pods are created as they are sent.
	Skip []string
	// PodEvents is the webhook's option of that name; false (its default)
	// records Events for denials, warnings and fallbacks only.
	PodEvents bool
	// SealWindow is the webhook's option of that name (--seal-window):
	// how long a pod's own seal holds; zero means its default (90s).
	SealWindow time.Duration
	// NoDRAAlternatives is the webhook's option of that name
	// (--no-dra-alternatives): every pod placed on one pool.
	NoDRAAlternatives bool
	// PoolPick is the webhook's option of that name (--pool-pick): how a
	// pod placed on one pool gets its pool; empty is its default.
	PoolPick webhook.PoolPick
	// WebhookBinary is a built cmd/webhook. When set, gpuadmit's webhook runs
	// as that process, as it is deployed: its own flags, a kubeconfig of its
	// ServiceAccount, /metrics on a loopback port (WebhookMetricsURL); its
	// /proc comm is the file's name. Empty runs it in this process
	// (webhook.Run, impersonating the ServiceAccount), as the end-to-end tests do.
	WebhookBinary string
	// WebhookPprof is where that process serves Go's /debug/pprof (its
	// --pprof-bind-address), to profile it; empty serves none, and
	// PprofFreePort a loopback port chosen at each start and handed to
	// the process bound (WebhookPprofAddr says which).
	WebhookPprof string
	// WebhookEnv are NAME=value settings given to gpuadmit's processes
	// (webhook and controller, when WebhookBinary runs them) after the
	// environment their Deployments give them, so they override it: a
	// memory limit other than the Deployments' (GPUADMIT_MEMORY_LIMIT) for
	// a benchmark of a larger cluster than deploy/base is sized for.
	WebhookEnv []string
	// APIServerArgs are kube-apiserver flags (names without dashes) set over
	// envtest's defaults, for a control plane that real kubelets join
	// (authorization-mode Node,RBAC, NodeRestriction; see test/e2e/node);
	// nil keeps envtest's.
	APIServerArgs map[string][]string
	// EtcdArgs are etcd flags (names without dashes) set over envtest's
	// defaults: a larger --quota-backend-bytes and its own compaction for
	// a benchmark that stores more than etcd's default 2 GiB quota allows
	// (gpuadmit-bench scale); nil keeps envtest's.
	EtcdArgs map[string][]string
	// Controllers are kube-controller-manager controllers run beside the
	// default ones (node-lifecycle-controller, say, which lifts a real
	// node's not-ready taint); nil runs the default ones only.
	Controllers []string
}

// Cluster is a running control plane.
type Cluster struct {
	Config     *rest.Config
	Client     client.Client
	Kubeconfig string // path of an admin kubeconfig
	LogDir     string

	env        *envtest.Environment
	opts       Options
	procs      []*Proc
	webhook    *runningWebhook
	controller *runningWebhook
}

// Start brings the control plane up and waits until gpuadmit is ready. On
// error everything already started is stopped.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	// Debian's etcd 3.4 lacks the progress notifications the API server needs
	// to serve WatchList streams; clients would fall back after a warning each
	// time, so they are told not to try (this process and the components).
	os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	c = &Cluster{opts: opts, LogDir: opts.LogDir}
	defer func() {
		if err != nil {
			c.Stop()
			err = fmt.Errorf("%w (component logs in %s)", err, c.LogDir)
		}
	}()
	if c.LogDir == "" {
		if c.LogDir, err = os.MkdirTemp("", "gpuadmit-e2e-"); err != nil {
			return c, err
		}
	}
	if err := c.startAPIServer(); err != nil {
		return c, fmt.Errorf("step apiserver: %w", err)
	}
	if err := c.startComponents(); err != nil {
		return c, err
	}
	if err := c.grantWebhook(ctx); err != nil {
		return c, fmt.Errorf("step webhook rbac: %w", err)
	}
	if err := c.waitRecordPolicy(ctx, 30*time.Second); err != nil {
		return c, fmt.Errorf("step record policy: %w", err)
	}
	if slices.Contains(opts.Skip, "webhook") {
		return c, nil
	}
	if err := c.StartWebhook(ctx); err != nil {
		return c, fmt.Errorf("step webhook: %w", err)
	}
	return c, nil
}

func (c *Cluster) startAPIServer() error {
	c.env = &envtest.Environment{
		BinaryAssetsDirectory: c.opts.BinDir,
		CRDDirectoryPaths:     []string{filepath.Join(c.opts.BinDir, "cert-manager-crds")},
		ErrorIfCRDPathMissing: true,
		// envtest waits 10s for the CRDs to be served, which a loaded
		// machine (a benchmark beside a build) overruns.
		CRDInstallOptions: envtest.CRDInstallOptions{MaxTime: 2 * time.Minute},
	}
	if !slices.Contains(c.opts.Skip, "webhook") {
		c.env.WebhookInstallOptions.Paths = []string{filepath.Join(c.opts.Root, "deploy/base/mutatingwebhookconfiguration.yaml")}
	}
	for name, values := range c.opts.APIServerArgs {
		c.env.ControlPlane.GetAPIServer().Configure().Set(name, values...)
	}
	if len(c.opts.EtcdArgs) > 0 {
		c.env.ControlPlane.Etcd = &envtest.Etcd{}
		for name, values := range c.opts.EtcdArgs {
			c.env.ControlPlane.Etcd.Configure().Set(name, values...)
		}
	}
	apiLog, err := os.Create(filepath.Join(c.LogDir, "kube-apiserver.log"))
	if err != nil {
		return err
	}
	c.env.ControlPlane.GetAPIServer().Out, c.env.ControlPlane.GetAPIServer().Err = apiLog, apiLog
	if c.Config, err = c.env.Start(); err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	if c.Client, err = client.New(c.Config, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	if err := os.WriteFile(c.CAFile(), c.Config.CAData, 0o644); err != nil {
		return err
	}
	return c.writeKubeconfig()
}

// CAFile is the file of the CA that signed the API server's serving
// certificate: the controller-manager's --root-ca-file, which its root-CA
// publisher puts in every namespace's kube-root-ca.crt for ServiceAccount
// token volumes.
func (c *Cluster) CAFile() string { return filepath.Join(c.LogDir, "ca.crt") }

func (c *Cluster) writeKubeconfig() error {
	c.Kubeconfig = filepath.Join(c.LogDir, "kubeconfig")
	return c.writeKubeconfigFor("gpuadmit-e2e", c.Kubeconfig)
}

// writeKubeconfigFor writes a kubeconfig for user name in system:masters.
// The scheduler and the controller-manager each get their own, named as in a
// real cluster, because admission tells them apart: deploy/dra's claims
// policy lets system:kube-scheduler and system:kube-controller-manager write
// claims of gpuadmit's classes. system:masters keeps RBAC out of the way.
func (c *Cluster) writeKubeconfigFor(name, path string) error {
	return c.WriteKubeconfig(path, name, "system:masters")
}

// WriteKubeconfig writes to path a kubeconfig that authenticates as user in
// groups with a client certificate the API server trusts: a kubelet's
// system:node:<name> in system:nodes, say.
func (c *Cluster) WriteKubeconfig(path, user string, groups ...string) error {
	u, err := c.env.AddUser(envtest.User{Name: user, Groups: groups}, nil)
	if err != nil {
		return err
	}
	b, err := u.KubeConfig()
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

func (c *Cluster) startComponents() error {
	k := "--kubeconfig=" + c.Kubeconfig
	auth := func(user string) ([]string, error) {
		path := filepath.Join(c.LogDir, user+".kubeconfig")
		if err := c.writeKubeconfigFor("system:"+user, path); err != nil {
			return nil, err
		}
		return []string{"--kubeconfig=" + path, "--authentication-kubeconfig=" + path, "--authorization-kubeconfig=" + path, "--leader-elect=false", "--secure-port=0"}, nil
	}
	schedulerArgs, err := auth("kube-scheduler")
	if err != nil {
		return err
	}
	kcmArgs, err := auth("kube-controller-manager")
	if err != nil {
		return err
	}
	certDir := c.env.ControlPlane.APIServer.CertDir
	steps := []struct {
		name string
		args []string
	}{
		{"kube-scheduler", schedulerArgs},
		// The resource-quota controller keeps its default full resync (5m).
		// A full resync recounts usage from its pod informer, which can lag
		// pods admitted a moment ago, and writes the lower count: quota
		// admission is race-free, a resync landing mid-burst is not
		// (upstream's known window). A 5s period made the 100-pod race test
		// fail now and then; nothing here needs the periodic recount.
		{"kube-controller-manager", append(kcmArgs,
			"--controllers="+strings.Join(slices.Concat(defaultControllers, c.opts.Controllers), ","),
			"--service-account-private-key-file="+filepath.Join(certDir, "sa-signer.key"),
			"--root-ca-file="+c.CAFile(),
			"--use-service-account-credentials=false",
			"--concurrent-resource-quota-syncs=2")},
		{"kwok", append([]string{k, "--manage-all-nodes=true"}, kwokStages(c.opts.BinDir)...)},
	}
	for _, s := range steps {
		if slices.Contains(c.opts.Skip, s.name) {
			continue
		}
		p, err := startProc(filepath.Join(c.opts.BinDir, s.name), s.name, c.LogDir, s.args...)
		if err != nil {
			return fmt.Errorf("step %s: %w", s.name, err)
		}
		c.procs = append(c.procs, p)
	}
	return nil
}

// StartProcess runs another component, the binary name in the binary
// directory, with its log in the log directory (Tail reads it); stop ends it.
// The cluster's Stop ends it if the test did not.
func (c *Cluster) StartProcess(name string, args ...string) (stop func(), err error) {
	p, err := startProc(filepath.Join(c.opts.BinDir, name), name, c.LogDir, args...)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c.procs = append(c.procs, p)
	return p.stop, nil
}

// defaultControllers are the kube-controller-manager controllers every
// cluster runs; Options.Controllers adds to them.
var defaultControllers = []string{"resourcequota", "namespace", "garbagecollector", "serviceaccount-token", "serviceaccount", "resourceclaim-controller", "replicaset", "job", "statefulset", "daemonset"}

func kwokStages(bin string) []string {
	files, _ := filepath.Glob(filepath.Join(bin, "kwok-stages", "*.yaml"))
	args := make([]string, 0, len(files))
	for _, f := range files {
		args = append(args, "--config="+f)
	}
	return args
}

// Stop ends gpuadmit, every component and the API server.
func (c *Cluster) Stop() {
	c.StopWebhook()
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].stop()
	}
	c.procs = nil
	if c.env != nil {
		_ = c.env.Stop()
		c.env = nil
	}
}

// Tail returns the last lines of a component's log (kube-apiserver,
// kube-scheduler, kube-controller-manager, kwok, webhook), for failure messages.
func (c *Cluster) Tail(component string, lines int) string {
	return TailFile(filepath.Join(c.LogDir, component+".log"), lines)
}

// webhookUser and controllerUser are the identities gpuadmit's webhook and
// controller run as: their ServiceAccounts in deploy/base, so that a grant
// missing from deploy/base/rbac.yaml fails here.
const (
	webhookNamespace = "gpuadmit-system"
	webhookUser      = "system:serviceaccount:" + webhookNamespace + ":gpuadmit"
	controllerUser   = "system:serviceaccount:" + webhookNamespace + ":gpuadmit-controller"
)

// grantWebhook creates deploy/base's namespace, ServiceAccounts and RBAC, the
// policy that guards gpuadmit's record and the one that keeps the
// controller to what gpuadmit owns (both run in the API server).
func (c *Cluster) grantWebhook(ctx context.Context) error {
	for _, f := range []string{"namespace.yaml", "serviceaccount.yaml", "rbac.yaml", "recordpolicy.yaml", "controller-policy.yaml"} {
		if err := c.Apply(ctx, filepath.Join(c.opts.Root, "deploy/base", f)); err != nil {
			return err
		}
	}
	return nil
}

// StartScheduler runs a second scheduler, the binary at path, with the
// KubeSchedulerConfiguration config (its clientConnection, settings kept,
// is pointed at the API server) as user, in system:masters like the other components so RBAC
// stays out of the way. It logs to LogDir/<name>.log and is stopped with the
// cluster. It serves no port unless args (flags of kube-scheduler, after
// and so over the defaults) say otherwise: --secure-port=N for its metrics.
func (c *Cluster) StartScheduler(path, name, user string, config map[string]any, args ...string) error {
	_, err := c.startScheduler(nil, path, name, user, config, args...)
	return err
}

// StartSchedulerWrapped is StartSchedulerProc with the scheduler run by the
// command wrap, which is given the scheduler's path and arguments after its
// own (taskset --cpu-list 1, say); nil runs the scheduler itself.
func (c *Cluster) StartSchedulerWrapped(wrap []string, path, name, user string, config map[string]any, args ...string) (*Proc, error) {
	return c.startScheduler(wrap, path, name, user, config, args...)
}

// StartSchedulerProc is StartScheduler, returning the process, for a test
// that stops, pauses or kills it itself (it is still stopped with the
// cluster).
func (c *Cluster) StartSchedulerProc(path, name, user string, config map[string]any, args ...string) (*Proc, error) {
	return c.startScheduler(nil, path, name, user, config, args...)
}

func (c *Cluster) startScheduler(wrap []string, path, name, user string, config map[string]any, args ...string) (*Proc, error) {
	kubeconfig := filepath.Join(c.LogDir, name+".kubeconfig")
	if err := c.writeKubeconfigFor(user, kubeconfig); err != nil {
		return nil, err
	}
	conn, _ := config["clientConnection"].(map[string]any)
	if conn == nil {
		conn = map[string]any{}
	}
	conn["kubeconfig"] = kubeconfig
	config["clientConnection"] = conn
	b, err := yaml.Marshal(config)
	if err != nil {
		return nil, err
	}
	file := filepath.Join(c.LogDir, name+".yaml")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		return nil, err
	}
	args = append([]string{"--config=" + file, "--secure-port=0"}, args...)
	if len(wrap) > 0 {
		path, args = wrap[0], append(append(wrap[1:len(wrap):len(wrap)], path), args...)
	}
	p, err := startProc(path, name, c.LogDir, args...)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c.procs = append(c.procs, p)
	return p, nil
}
