package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/gpuadmit/gpuadmit/internal/listener"
	"github.com/gpuadmit/gpuadmit/pkg/webhook"
)

// PprofFreePort is the Options.WebhookPprof that has each start of the
// webhook's process serve /debug/pprof on a loopback port chosen then and
// handed to it bound, as its probe and metrics ports are.
const PprofFreePort = "free-port"

// runningWebhook is gpuadmit's webhook as started, in this process or as a
// child process.
type runningWebhook struct {
	probe   string       // host:port of /healthz and /readyz
	metrics string       // host:port of /metrics; "" when it serves none
	pprof   string       // host:port of /debug/pprof; "" when it serves none
	exited  func() error // nil while it runs, else why it stopped
	stop    func()       // stops it and waits for it to drain
}

// StartWebhook runs gpuadmit as it is deployed, two parts under two
// ServiceAccounts: the webhook (--role=webhook) with the serving certificate
// envtest registered, and the controller (--role=controller, the
// reconcilers), and waits until both pass /readyz.
func (c *Cluster) StartWebhook(ctx context.Context) error {
	if err := c.StartWebhookUnready(ctx); err != nil {
		return err
	}
	if err := c.webhook.waitReady(30 * time.Second); err != nil {
		return err
	}
	return c.controller.waitReady(30 * time.Second)
}

// StartWebhookUnready runs gpuadmit's webhook and controller and returns at
// once, for tests of a replica that never becomes ready (no policy set it
// can activate). They run in this process, or as Options.WebhookBinary when
// that is set.
func (c *Cluster) StartWebhookUnready(ctx context.Context) error {
	if c.webhook != nil {
		return errors.New("the webhook is already running")
	}
	keyDir, err := c.recordKeyDir()
	if err != nil {
		return err
	}
	wo := c.env.WebhookInstallOptions
	opts := webhook.Options{
		Policies: c.opts.Policies, PolicyInterval: time.Second, RecordKeyDir: keyDir,
		Host: wo.LocalServingHost, Port: wo.LocalServingPort, CertDir: wo.LocalServingCertDir,
		MetricsAddr: "0", ShutdownTimeout: 5 * time.Second,
		PodEvents: c.opts.PodEvents, SealWindow: c.opts.SealWindow, NoDRAAlternatives: c.opts.NoDRAAlternatives,
		PoolPick: c.opts.PoolPick,
	}
	if c.webhook, err = c.startPart(ctx, parts[0], opts); err != nil {
		return err
	}
	if c.controller, err = c.startPart(ctx, parts[1], opts); err != nil {
		c.StopWebhook()
		return err
	}
	return nil
}

// part is one of gpuadmit's Deployments: its role, the ServiceAccount it
// runs as, and its manifest and container in deploy/base.
type part struct {
	role                webhook.Role
	user, account       string
	manifest, container string
}

// parts are the webhook and the controller, as deploy/base runs them.
var parts = []part{
	{role: webhook.RoleWebhook, user: webhookUser, account: "gpuadmit", manifest: "deploy/base/deployment.yaml", container: "webhook"},
	{role: webhook.RoleController, user: controllerUser, account: "gpuadmit-controller", manifest: "deploy/base/controller.yaml", container: "controller"},
}

// startPart runs one part with its own probe address, logging to
// <container>.log. In this process the part is handed a listener bound to
// a port the kernel chose, so no other process can take that port between
// choosing and binding it (other tests' control planes run beside this one).
func (c *Cluster) startPart(ctx context.Context, p part, opts webhook.Options) (*runningWebhook, error) {
	opts.Role = p.role
	if c.opts.WebhookBinary != "" {
		return retryPortTaken(3, func() (*runningWebhook, error) { return c.startWebhookProcess(p, opts) })
	}
	ln, err := listener.Loopback("")
	if err != nil {
		return nil, fmt.Errorf("listen for %s's probes: %w", p.container, err)
	}
	opts.ProbeAddr, opts.ProbeListener = ln.Addr().String(), ln
	w, err := c.startWebhookInProcess(ctx, p, opts)
	if err != nil {
		ln.Close()
	}
	return w, err
}

// startWebhookInProcess runs webhook.Run in a goroutine, impersonating the
// part's ServiceAccount, logging to its file.
func (c *Cluster) startWebhookInProcess(ctx context.Context, p part, opts webhook.Options) (*runningWebhook, error) {
	logf, err := os.OpenFile(filepath.Join(c.LogDir, p.container+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	log := zap.New(zap.WriteTo(logf), zap.UseDevMode(false))
	if p.role == webhook.RoleWebhook {
		// client-go (klog) and controller-runtime internals without a
		// logger of their own log to the webhook's file.
		klog.SetLogger(log)
		ctrl.SetLogger(log)
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: p.user}
	done := make(chan struct{})
	var runErr error
	go func() { runErr = webhook.Run(wctx, cfg, opts, log); close(done) }()
	return &runningWebhook{
		probe: opts.ProbeAddr,
		exited: func() error {
			select {
			case <-done:
				return fmt.Errorf("%s exited: %w", p.container, runErr)
			default:
				return nil
			}
		},
		stop: func() {
			cancel()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
			}
			logf.Close()
		},
	}, nil
}

// retryPortTaken starts a part's process again, at most tries times in
// all, while it fails with listener.ErrTaken. Its probe, metrics and pprof
// ports are handed to it bound and cannot be taken; the webhook's serving
// port can: envtest chooses it free and releases it before the API server
// is told of it, and controller-runtime's webhook server binds it itself.
// Another process that took it meanwhile (an outgoing connection's local
// port, often) may have let it go by the next start.
func retryPortTaken(tries int, start func() (*runningWebhook, error)) (*runningWebhook, error) {
	for i := 1; ; i++ {
		w, err := start()
		if err == nil || i >= tries || !errors.Is(err, listener.ErrTaken) {
			return w, err
		}
	}
}

// startWebhookProcess runs Options.WebhookBinary (cmd/webhook) with the
// flags a Deployment would give it, the environment deploy/base's gives it
// (deploymentEnv), opts' settings, a kubeconfig of the part's
// ServiceAccount, and its probes and /metrics on loopback ports bound here
// and handed to it (--*-bind-address=fd:N), and waits until it serves both
// (listener.ErrTaken where it exits because its webhook port was taken). It
// logs to <container>.log and is stopped with SIGTERM, as a kubelet stops
// it.
func (c *Cluster) startWebhookProcess(p part, opts webhook.Options) (*runningWebhook, error) {
	kubeconfig, err := c.accountKubeconfig(p)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(c.opts.WebhookBinary)
	defer listener.Release(cmd) // the child holds the sockets once started
	probeFD, metricsFD := "", ""
	if opts.ProbeAddr, probeFD, err = passLoopback(cmd); err != nil {
		return nil, err
	}
	metrics, metricsFD, err := passLoopback(cmd)
	if err != nil {
		return nil, err
	}
	args := []string{
		"--role=" + string(p.role),
		"--kubeconfig=" + kubeconfig,
		"--policy-poll-interval=" + opts.PolicyInterval.String(),
		"--metrics-bind-address=" + metricsFD, "--health-probe-bind-address=" + probeFD,
	}
	if p.role == webhook.RoleWebhook {
		args = append(args, "--record-key-dir="+opts.RecordKeyDir,
			"--host="+opts.Host, "--port="+strconv.Itoa(opts.Port), "--cert-dir="+opts.CertDir,
			"--pod-events="+strconv.FormatBool(opts.PodEvents))
		if opts.NoDRAAlternatives {
			args = append(args, "--no-dra-alternatives")
		}
		if opts.PoolPick != "" {
			args = append(args, "--pool-pick="+string(opts.PoolPick))
		}
		if opts.SealWindow > 0 {
			args = append(args, "--seal-window="+opts.SealWindow.String())
		}
	}
	if opts.Policies != "" {
		args = append(args, "--policies="+opts.Policies)
	}
	pprof := ""
	if c.opts.WebhookPprof != "" && p.role == webhook.RoleWebhook {
		pprof = c.opts.WebhookPprof
		bind := pprof
		if pprof == PprofFreePort {
			if pprof, bind, err = passLoopback(cmd); err != nil {
				return nil, err
			}
		}
		args = append(args, "--pprof-bind-address="+bind)
	}
	logPath := filepath.Join(c.LogDir, p.container+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	before, err := logf.Seek(0, io.SeekEnd)
	if err != nil {
		logf.Close()
		return nil, err
	}
	env, err := deploymentEnv(filepath.Join(c.opts.Root, p.manifest), p.container)
	if err != nil {
		logf.Close()
		return nil, err
	}
	env = append(env, c.opts.WebhookEnv...)
	cmd.Args = append(cmd.Args, args...)
	proc, err := startCmd(cmd, p.container, logf, env)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", c.opts.WebhookBinary, err)
	}
	w := &runningWebhook{
		probe: opts.ProbeAddr, metrics: metrics, pprof: pprof,
		exited: func() error {
			select {
			case <-proc.done:
				return fmt.Errorf("%s exited (%s): %s", p.container, proc.cmd.ProcessState, c.Tail(p.container, 5))
			default:
				return nil
			}
		},
		stop: proc.stop,
	}
	if err := w.waitListening(time.Minute); err != nil {
		w.stop()
		if b, rerr := os.ReadFile(logPath); rerr == nil && int64(len(b)) > before {
			return nil, listener.Exited(err, string(b[before:]))
		}
		return nil, err
	}
	return w, nil
}

// passLoopback binds a loopback port and passes it to the process cmd will
// start: its host:port, and the address that names it in the child.
func passLoopback(cmd *exec.Cmd) (hostPort, child string, err error) {
	l, err := listener.Loopback("")
	if err != nil {
		return "", "", err
	}
	hostPort = l.Addr().String()
	child, err = listener.Pass(cmd, l)
	return hostPort, child, err
}

// waitListening waits until the process answers on its probe and metrics
// addresses, ready or not; an error if it exits first.
func (w *runningWebhook) waitListening(timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := w.exited(); err != nil {
			return err
		}
		if answers("http://"+w.probe+"/healthz") && answers("http://"+w.metrics+"/metrics") {
			return w.exited() // bound both; a later bind (the webhook's port) may still have failed
		}
	}
	return fmt.Errorf("nothing answers on %s and %s after %s", w.probe, w.metrics, timeout)
}

// answers reports whether url answers 200.
func answers(url string) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// accountKubeconfig writes, once per cluster, a kubeconfig whose client
// certificate names the part's ServiceAccount and its groups (what its
// token would say), outside system:masters, so deploy/base's RBAC applies
// as it does to the in-process parts' impersonation.
func (c *Cluster) accountKubeconfig(p part) (string, error) {
	path := filepath.Join(c.LogDir, p.account+".kubeconfig")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	user, err := c.env.AddUser(envtest.User{Name: p.user, Groups: []string{
		"system:serviceaccounts", "system:serviceaccounts:" + webhookNamespace,
	}}, nil)
	if err != nil {
		return "", err
	}
	b, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, b, 0o600)
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

func (w *runningWebhook) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if err := w.exited(); err != nil {
			return err
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

// StopWebhook stops gpuadmit's webhook and controller and waits for them to drain.
func (c *Cluster) StopWebhook() {
	for _, w := range []**runningWebhook{&c.webhook, &c.controller} {
		if *w != nil {
			(*w).stop()
			*w = nil
		}
	}
}

// WebhookMetricsURL is the URL of gpuadmit's /metrics when it runs as its
// own process (Options.WebhookBinary); "" when it runs in this process,
// whose controller-runtime registry holds its metrics, or is stopped.
func (c *Cluster) WebhookMetricsURL() string {
	if c.webhook == nil || c.webhook.metrics == "" {
		return ""
	}
	return "http://" + c.webhook.metrics + "/metrics"
}

// WebhookPprofAddr is the host:port of the webhook process's /debug/pprof
// (Options.WebhookPprof), "" when it serves none or is stopped.
func (c *Cluster) WebhookPprofAddr() string {
	if c.webhook == nil {
		return ""
	}
	return c.webhook.pprof
}

// ControllerMetricsURL is the URL of the controller's /metrics (the
// usage metrics its leader exports) when it runs as its own process; ""
// when it runs in this process, whose controller-runtime registry holds
// them, or is stopped.
func (c *Cluster) ControllerMetricsURL() string {
	if c.controller == nil || c.controller.metrics == "" {
		return ""
	}
	return "http://" + c.controller.metrics + "/metrics"
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

// deploymentEnv is the environment a deploy/base Deployment gives its
// container name that a process here can have: literal values, and the
// container's own resources from the downward API; the pod's name and
// namespace (fieldRef) are left out.
func deploymentEnv(path, name string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d := &appsv1.Deployment{}
	if err := yaml.Unmarshal(b, d); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != name {
			continue
		}
		var env []string
		for _, e := range c.Env {
			switch {
			case e.ValueFrom == nil:
				env = append(env, e.Name+"="+e.Value)
			case e.ValueFrom.ResourceFieldRef != nil:
				v, err := memoryValue(e.ValueFrom.ResourceFieldRef, c)
				if err != nil {
					return nil, fmt.Errorf("%s: env %s: %w", path, e.Name, err)
				}
				env = append(env, e.Name+"="+v)
			}
		}
		return env, nil
	}
	return nil, fmt.Errorf("%s: no container named %s", path, name)
}

// memoryValue is what the downward API gives for a container's memory
// request or limit: the bytes divided by the divisor, rounded up, as the
// kubelet writes it. Other resources are not used by the Deployment.
func memoryValue(f *corev1.ResourceFieldSelector, c corev1.Container) (string, error) {
	var q resource.Quantity
	switch f.Resource {
	case "limits.memory":
		q = c.Resources.Limits[corev1.ResourceMemory]
	case "requests.memory":
		q = c.Resources.Requests[corev1.ResourceMemory]
	default:
		return "", fmt.Errorf("resource %s: only memory is read here", f.Resource)
	}
	div := int64(1)
	if !f.Divisor.IsZero() {
		div = f.Divisor.Value()
	}
	return strconv.FormatInt((q.Value()+div-1)/div, 10), nil
}
