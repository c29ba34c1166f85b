package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
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
}

// Cluster is a running control plane.
type Cluster struct {
	Config     *rest.Config
	Client     client.Client
	Kubeconfig string // path of an admin kubeconfig
	LogDir     string

	env     *envtest.Environment
	opts    Options
	procs   []*proc
	webhook *inProcess
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
	}
	if !slices.Contains(c.opts.Skip, "webhook") {
		c.env.WebhookInstallOptions.Paths = []string{filepath.Join(c.opts.Root, "deploy/base/mutatingwebhookconfiguration.yaml")}
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
	return c.writeKubeconfig()
}

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
	user, err := c.env.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	b, err := user.KubeConfig()
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
			"--controllers=resourcequota,namespace,garbagecollector,serviceaccount-token,serviceaccount,resourceclaim-controller,replicaset,job",
			"--service-account-private-key-file="+filepath.Join(certDir, "sa-signer.key"),
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
	return tail(filepath.Join(c.LogDir, component+".log"), lines)
}

// webhookUser is the identity gpuadmit's webhook runs as: its ServiceAccount
// in deploy/base, so that a grant missing from deploy/base/rbac.yaml fails here.
const webhookUser = "system:serviceaccount:gpuadmit-system:gpuadmit"

// grantWebhook creates deploy/base's namespace, ServiceAccount and RBAC, and
// the policy that guards gpuadmit's record (it runs in the API server).
func (c *Cluster) grantWebhook(ctx context.Context) error {
	for _, f := range []string{"namespace.yaml", "serviceaccount.yaml", "rbac.yaml", "recordpolicy.yaml"} {
		if err := c.Apply(ctx, filepath.Join(c.opts.Root, "deploy/base", f)); err != nil {
			return err
		}
	}
	return nil
}

// inProcess is gpuadmit's webhook running in this process.
type inProcess struct {
	cancel context.CancelFunc
	done   chan error
	probe  string
	log    *os.File
}

// StartWebhook runs gpuadmit's webhook with the serving certificate envtest
// registered, and waits until its /readyz passes.
func (c *Cluster) StartWebhook(ctx context.Context) error {
	if err := c.StartWebhookUnready(ctx); err != nil {
		return err
	}
	return c.webhook.waitReady(30 * time.Second)
}

// StartWebhookUnready runs gpuadmit's webhook and returns at once, for tests
// of a replica that never becomes ready (no policy set it can activate).
func (c *Cluster) StartWebhookUnready(ctx context.Context) error {
	if c.webhook != nil {
		return errors.New("the webhook is already running")
	}
	probe, err := freeAddr()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(c.LogDir, "webhook.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	keyDir, err := c.recordKeyDir()
	if err != nil {
		return err
	}
	wo := c.env.WebhookInstallOptions
	opts := webhook.Options{
		Policies: c.opts.Policies, PolicyInterval: time.Second, RecordKeyDir: keyDir,
		Host: wo.LocalServingHost, Port: wo.LocalServingPort, CertDir: wo.LocalServingCertDir,
		MetricsAddr: "0", ProbeAddr: probe, ShutdownTimeout: 5 * time.Second,
		PodEvents: c.opts.PodEvents,
	}
	wctx, cancel := context.WithCancel(ctx)
	w := &inProcess{cancel: cancel, done: make(chan error, 1), probe: probe, log: logf}
	log := zap.New(zap.WriteTo(logf), zap.UseDevMode(false))
	// client-go (klog) and controller-runtime internals log to the webhook's file too.
	klog.SetLogger(log)
	ctrl.SetLogger(log)
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: webhookUser}
	go func() { w.done <- webhook.Run(wctx, cfg, opts, log) }()
	c.webhook = w
	return nil
}

// recordKeyDir holds a random record key, made once per cluster (as the dev
// overlay's), so the webhook seals its records as a deployed one does and a
// restarted webhook still verifies the pods sealed before.
func (c *Cluster) recordKeyDir() (string, error) {
	dir := filepath.Join(c.LogDir, "record-key")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "current")
	if _, err := os.Stat(path); err == nil {
		return dir, nil
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	return dir, os.WriteFile(path, []byte(hex.EncodeToString(key)), 0o600)
}

func (w *inProcess) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case err := <-w.done:
			return fmt.Errorf("webhook exited: %v", err)
		default:
		}
		resp, err := http.Get("http://" + w.probe + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("webhook not ready after %s", timeout)
}

// StopWebhook stops gpuadmit and waits for it to drain.
func (c *Cluster) StopWebhook() {
	if c.webhook == nil {
		return
	}
	c.webhook.cancel()
	select {
	case <-c.webhook.done:
	case <-time.After(20 * time.Second):
	}
	c.webhook.log.Close()
	c.webhook = nil
}

// Serving is where gpuadmit's webhook listens and the serving certificate
// the API server trusts (tls.crt and tls.key in certDir, signed by caPEM),
// for other webhook servers that the API server should reach the same way.
func (c *Cluster) Serving() (host string, port int, certDir string, caPEM []byte) {
	wo := c.env.WebhookInstallOptions
	return wo.LocalServingHost, wo.LocalServingPort, wo.LocalServingCertDir, wo.LocalServingCAData
}

// Readyz returns the webhook's readiness detail.
func (c *Cluster) Readyz() string {
	if c.webhook == nil {
		return "webhook stopped"
	}
	resp, err := http.Get("http://" + c.webhook.probe + "/readyz")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b := make([]byte, 4096)
	n, _ := resp.Body.Read(b)
	return string(b[:n])
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// StartScheduler runs a second scheduler, the binary at path, with the
// KubeSchedulerConfiguration config (its clientConnection, settings kept,
// is pointed at the API server) as user, in system:masters like the other components so RBAC
// stays out of the way. It logs to LogDir/<name>.log and is stopped with the
// cluster. It serves no port unless args (flags of kube-scheduler, after
// and so over the defaults) say otherwise: --secure-port=N for its metrics.
func (c *Cluster) StartScheduler(path, name, user string, config map[string]any, args ...string) error {
	kubeconfig := filepath.Join(c.LogDir, name+".kubeconfig")
	if err := c.writeKubeconfigFor(user, kubeconfig); err != nil {
		return err
	}
	conn, _ := config["clientConnection"].(map[string]any)
	if conn == nil {
		conn = map[string]any{}
	}
	conn["kubeconfig"] = kubeconfig
	config["clientConnection"] = conn
	b, err := yaml.Marshal(config)
	if err != nil {
		return err
	}
	file := filepath.Join(c.LogDir, name+".yaml")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		return err
	}
	p, err := startProc(path, name, c.LogDir, append([]string{"--config=" + file, "--secure-port=0"}, args...)...)
	if err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	c.procs = append(c.procs, p)
	return nil
}
