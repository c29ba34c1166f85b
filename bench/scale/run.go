package scale

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gpuadmit/gpuadmit/bench/admission"
	"github.com/gpuadmit/gpuadmit/bench/agents"
	"github.com/gpuadmit/gpuadmit/pkg/agent"
	"github.com/gpuadmit/gpuadmit/test/e2e/cluster"
)

// Namespace holds the benchmark's pods; it has no ResourceQuota.
const Namespace = "bench"

// etcdQuota is etcd's --quota-backend-bytes: 8 GiB, etcd's largest
// recommended, against its default of 2.
const etcdQuota = "8589934592"

// webhookMemoryLimitEnv is cmd/webhook's MemoryLimitEnv: the container's
// memory limit in bytes, which deploy/base's Deployment sets from the
// downward API (TestWebhookMemoryLimitEnvIsTheDeployments checks the name).
const webhookMemoryLimitEnv = "GPUADMIT_MEMORY_LIMIT"

// bench is a run in progress.
type bench struct {
	opts Options
	cl   *cluster.Cluster
	cs   kubernetes.Interface
	proc *webhookProc
	// apiserver is kube-apiserver's pid, whose CPU time each phase reads.
	apiserver int
	fleet     []gpuNode
	added     int // nodes of the fleet created so far
	pods      int // pods created so far, over all phases
	clients   []kubernetes.Interface
}

// Run starts the control plane and measures every step; the report holds
// the steps measured, the one that failed too (with its error).
func Run(ctx context.Context, opts Options) (*Report, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	ctrllog.SetLogger(logr.Discard()) // envtest logs through controller-runtime; the components log to their files
	rep := &Report{Started: time.Now().UTC(), Machine: machineOf(), Settings: settingsOf(opts)}
	logDir, keep := opts.LogDir, opts.LogDir != ""
	if !keep {
		var err error
		if logDir, err = os.MkdirTemp("", "gpuadmit-bench-scale-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	b := &bench{opts: opts}
	err := b.run(ctx, logDir, rep)
	if b.cl != nil {
		b.cl.Stop()
	}
	rep.Finished, rep.Machine.LoadAfter = time.Now().UTC(), loadavg()
	if err != nil {
		return rep, fmt.Errorf("%w (logs in %s)", err, logDir)
	}
	if !keep {
		os.RemoveAll(logDir)
	}
	return rep, nil
}

func (b *bench) run(ctx context.Context, logDir string, rep *Report) error {
	if err := b.start(ctx, logDir); err != nil {
		return err
	}
	var err error
	if rep.Settings.WebhookMemoryLimit, err = b.proc.memoryLimit(); err != nil {
		return err
	}
	if b.fleet, err = fleet(b.opts.Root, b.opts.Steps[len(b.opts.Steps)-1], b.opts.DRAEvery); err != nil {
		return err
	}
	for _, n := range b.opts.Steps {
		st, err := b.step(ctx, n)
		rep.Steps = append(rep.Steps, st)
		if err != nil {
			rep.Steps[len(rep.Steps)-1].Err = err.Error()
			return fmt.Errorf("%d nodes: %w", n, err)
		}
	}
	return b.fill(ctx, rep)
}

// fill creates opts.Fill more pods of one template at the last step's
// nodes, reading the webhook's memory after every opts.FillChunk of them.
func (b *bench) fill(ctx context.Context, rep *Report) error {
	nodes := b.opts.Steps[len(b.opts.Steps)-1]
	for done := 0; done < b.opts.Fill; {
		n := min(b.opts.FillChunk, b.opts.Fill-done)
		out := admission.Load{Namespace: Namespace, Prefix: fmt.Sprintf("fill-%d", done/b.opts.FillChunk), Mix: admission.MixTemplate,
			First: b.pods, Pods: n, Clients: b.clients}.Run(ctx)
		created := len(out.Latencies)
		b.pods += created
		done += n
		pt := FillPoint{Nodes: nodes, Pods: created, Errors: len(out.Errors), PodsPerSecond: float64(created) / out.Wall.Seconds()}
		if len(out.Errors) > 0 {
			pt.FirstError = out.Errors[0]
		}
		var err error
		if pt.Memory, err = b.proc.memory(ctx); err != nil {
			return fmt.Errorf("fill: %w", err)
		}
		rep.Fill = append(rep.Fill, pt)
		b.progress("fill: %d pods cached, RSS %.0f MB (peak %.0f), heap %.0f MB; %d errors at %.0f pods/s", int(pt.Memory.Cache["Pod"]),
			pt.Memory.RSSMB, pt.Memory.PeakRSSMB, pt.Memory.HeapMB, pt.Errors, pt.PodsPerSecond)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

func (b *bench) progress(format string, args ...any) {
	fmt.Fprintf(b.opts.Progress, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// start brings up etcd (8 GiB quota, compacted every 5 minutes by itself
// as well as by the API server), kube-apiserver and gpuadmit as processes
// of their own, without kube-scheduler, kube-controller-manager or kwok:
// no pod is to be scheduled or run, and none of them should compete for
// the CPUs.
func (b *bench) start(ctx context.Context, logDir string) error {
	if b.opts.WebhookBinary == "" {
		b.progress("building cmd/webhook into %s", logDir)
	}
	bin, err := admission.WebhookBinary(ctx, b.opts.Root, b.opts.WebhookBinary, logDir)
	if err != nil {
		return err
	}
	b.progress("starting the control plane (logs in %s)", logDir)
	var env []string
	if b.opts.WebhookMemoryLimit > 0 {
		env = []string{fmt.Sprintf("%s=%d", webhookMemoryLimitEnv, b.opts.WebhookMemoryLimit)}
	}
	b.cl, err = cluster.Start(ctx, cluster.Options{BinDir: b.opts.BinDir, Root: b.opts.Root, LogDir: logDir,
		Skip: []string{"kube-scheduler", "kube-controller-manager", "kwok"}, WebhookBinary: bin, WebhookPprof: cluster.PprofFreePort,
		WebhookEnv: env,
		EtcdArgs: map[string][]string{
			"quota-backend-bytes":       {etcdQuota},
			"auto-compaction-mode":      {"periodic"},
			"auto-compaction-retention": {"5m"},
		}})
	if err != nil {
		return err
	}
	if b.cs, err = kubernetes.NewForConfig(b.cl.Config); err != nil {
		return err
	}
	pid, err := agents.FindProcess("--role=webhook", logDir)
	if err != nil {
		return fmt.Errorf("find gpuadmit's webhook process: %w", err)
	}
	u, err := url.Parse(b.cl.Config.Host)
	if err != nil {
		return fmt.Errorf("API server address %q: %w", b.cl.Config.Host, err)
	}
	if b.apiserver, err = agents.FindProcess("kube-apiserver", "--secure-port="+u.Port()); err != nil {
		return err
	}
	b.proc = &webhookProc{pid: pid, metrics: b.cl.WebhookMetricsURL(), pprof: b.cl.WebhookPprofAddr()}
	if err := b.setup(ctx); err != nil {
		return fmt.Errorf("step setup: %w", err)
	}
	b.clients, err = admission.NewClients(b.cl.Config, b.opts.Clients)
	return err
}

// setup creates the PriorityClasses the default policies name, the DRA
// DeviceClasses, and the benchmark namespace with its default ServiceAccount.
func (b *bench) setup(ctx context.Context) error {
	for _, f := range []string{"deploy/base/priorityclasses.yaml", "deploy/dra/deviceclasses.yaml"} {
		if err := b.cl.Apply(ctx, filepath.Join(b.opts.Root, f)); err != nil {
			return err
		}
	}
	return admission.CreateNamespace(ctx, b.cs, Namespace)
}

// addNodes creates the fleet's nodes up to n: each Node with its status,
// and on a DRA node the agent's ResourceSlices and Node annotation.
func (b *bench) addNodes(ctx context.Context, n int) error {
	b.progress("adding GPU nodes %d to %d", b.added, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := b.added; i < n; i++ {
		gn := b.fleet[i]
		g.Go(func() error { return b.addNode(gctx, gn) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	b.added = n
	return nil
}

func (b *bench) addNode(ctx context.Context, gn gpuNode) error {
	if err := b.cl.AddNode(ctx, gn.node.DeepCopy()); err != nil {
		return err
	}
	for i := range gn.slices {
		if _, err := b.cs.ResourceV1().ResourceSlices().Create(ctx, &gn.slices[i], metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create ResourceSlice %s: %w", gn.slices[i].Name, err)
		}
	}
	if gn.gpus == nil {
		return nil
	}
	if err := agent.NewNodePublisher(b.cl.Client, gn.node.Name).Publish(ctx, gn.gpus); err != nil {
		return fmt.Errorf("publish node %s as its agent does: %w", gn.node.Name, err)
	}
	return nil
}
