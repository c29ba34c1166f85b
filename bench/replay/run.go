package replay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gpuadmit/gpuadmit/bench/admission"
	"github.com/gpuadmit/gpuadmit/internal/listener"
	"github.com/gpuadmit/gpuadmit/pkg/webhook"
	"github.com/gpuadmit/gpuadmit/test/e2e/cluster"
)

// Run simulates the workload, then replays it through every configuration,
// each on a fresh control plane, and returns the report. It fails on a
// broken setup, never on a number.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	ctrllog.SetLogger(logr.Discard()) // envtest logs through controller-runtime; the components log to their files
	w, err := LoadWorkload(o.Trace, o.Workload, o.Seed, o.Nodes)
	if err != nil {
		return nil, err
	}
	rep := newReport(o, w)
	progress(o, "simulating %s on %d nodes, %d pods to 100%% arrived", SimPolicies, len(w.Nodes), len(w.Pods))
	if rep.Simulated, err = Simulate(w, o.Seed, SimPolicies); err != nil {
		return nil, err
	}
	var cpus *cpuSplit
	if o.SchedulerCPUs != "" {
		if cpus, err = splitCPUs(o.SchedulerCPUs); err != nil {
			return nil, err
		}
		if err := cpus.pinRest(); err != nil {
			return nil, err
		}
		rep.Settings.SchedulerCPUs, rep.Settings.RestCPUs = cpus.list, cpus.restList()
	}
	logDir, cleanup, err := logDirOf(o.LogDir)
	if err != nil {
		return nil, err
	}
	for _, config := range o.Configs {
		s, err := schedulerConfig(config, o.Root)
		if err != nil {
			return nil, err
		}
		if s.gpuadmit && o.SchedulerWorkload == WorkloadListed {
			if err := fixWorkload(s.profile, listedKinds(w.Listed)); err != nil {
				return nil, err
			}
		}
		if s.gpuadmit && o.Scheduler == "" {
			if o.Scheduler, err = buildScheduler(o.Root, logDir); err != nil {
				return nil, err
			}
		}
		r, err := replayOne(ctx, o, w, s, cpus, filepath.Join(logDir, config))
		if err != nil {
			return nil, fmt.Errorf("%s: %w (logs in %s)", config, err, logDir)
		}
		rep.Replayed = append(rep.Replayed, r)
	}
	rep.Finished, rep.Machine.LoadAfter = time.Now().UTC(), admission.LoadAvg()
	cleanup()
	return rep, nil
}

func progress(o Options, format string, args ...any) {
	fmt.Fprintf(o.Progress, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func logDirOf(dir string) (string, func(), error) {
	if dir != "" {
		return dir, func() {}, os.MkdirAll(dir, 0o755)
	}
	dir, err := os.MkdirTemp("", "gpuadmit-bench-replay-")
	return dir, func() { os.RemoveAll(dir) }, err
}

// buildScheduler builds gpuadmit-scheduler from the scheduler module.
func buildScheduler(root, dir string) (string, error) {
	bin := filepath.Join(dir, "gpuadmit-scheduler")
	build := exec.Command("go", "build", "-o", bin, "./cmd/gpuadmit-scheduler")
	build.Dir = filepath.Join(root, "scheduler")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build gpuadmit-scheduler: %w: %s", err, out)
	}
	return bin, nil
}

// replay is one configuration's run in progress.
type replay struct {
	o       Options
	w       Workload
	s       scheduler
	cl      *cluster.Cluster
	cs      kubernetes.Interface
	metrics string    // the scheduler's /metrics URL
	cpus    *cpuSplit // nil: the scheduler shares every CPU
	// owner is every pod's controller on the product's path (productOwner).
	owner metav1.OwnerReference
	// webhookRetries counts the creates tried again after the webhook failed.
	webhookRetries int
}

// replayOne starts a control plane with w's nodes, the scheduler s, and
// replays w's pods through it.
func replayOne(ctx context.Context, o Options, w Workload, s scheduler, cpus *cpuSplit, logDir string) (Replayed, error) {
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return Replayed{}, err
	}
	progress(o, "%s: starting the control plane (logs in %s)", s.config, logDir)
	cl, err := cluster.Start(ctx, clusterOptions(o, s, logDir))
	if err != nil {
		return Replayed{}, err
	}
	defer cl.Stop()
	r := &replay{o: o, w: w, s: s, cl: cl, cpus: cpus}
	if r.cs, err = kubernetes.NewForConfig(cl.Config); err != nil {
		return Replayed{}, err
	}
	if err := r.setup(ctx); err != nil {
		return Replayed{}, fmt.Errorf("step setup: %w", err)
	}
	if err := r.startScheduler(ctx); err != nil {
		return Replayed{}, fmt.Errorf("step scheduler: %w", err)
	}
	if s.product {
		if err := r.waitWebhook(ctx); err != nil {
			return Replayed{}, fmt.Errorf("step webhook: %w", err)
		}
	}
	return r.run(ctx)
}

// clusterOptions start etcd and kube-apiserver; for a product-path
// configuration also gpuadmit's webhook and controller (in this process,
// the embedded default policies, its MutatingWebhookConfiguration at a
// loopback URL) and kube-controller-manager, whose resourceclaim
// controller makes each pod's claims from the templates gpuadmit's
// controller creates (its default controllers only: no node lifecycle,
// so nodes without a kubelet stay as they are).
func clusterOptions(o Options, s scheduler, logDir string) cluster.Options {
	co := cluster.Options{BinDir: o.BinDir, Root: o.Root, LogDir: logDir,
		Skip: []string{"kube-scheduler", "kube-controller-manager", "kwok", "webhook"}}
	if s.product {
		co.Skip, co.NoDRAAlternatives = []string{"kube-scheduler", "kwok"}, s.onePool
		switch {
		case s.pick:
			co.PoolPick = webhook.PickExpected
		case s.onePool:
			co.PoolPick = webhook.PickOrder // the webhook before the pick by expected demand
		}
	}
	return co
}

// setup creates gpuadmit's DeviceClasses, the namespace, the nodes with
// their ResourceSlices and every pod's claim.
func (r *replay) setup(ctx context.Context) error {
	if err := r.cl.Apply(ctx, filepath.Join(r.o.Root, "deploy/dra/deviceclasses.yaml")); err != nil {
		return err
	}
	if err := admission.CreateNamespace(ctx, r.cs, Namespace); err != nil {
		return err
	}
	progress(r.o, "%s: adding %d nodes and their ResourceSlices", r.s.config, len(r.w.Nodes))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, n := range r.w.Nodes {
		g.Go(func() error {
			node := Node(n)
			if r.s.product {
				node = ProductNode(n)
			}
			if err := r.cl.AddNode(gctx, node); err != nil {
				return err
			}
			if s := Slice(n); s != nil {
				if _, err := r.cs.ResourceV1().ResourceSlices().Create(gctx, s, metav1.CreateOptions{}); err != nil {
					return fmt.Errorf("create slice of %s: %w", n.Name, err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if r.s.product {
		return r.productOwner(ctx) // the webhook writes the claims
	}
	progress(r.o, "%s: creating the claims of %d pods", r.s.config, len(r.w.Pods))
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, p := range r.w.Pods {
		c := Claim(PodName(i, p), p)
		if c == nil {
			continue
		}
		g.Go(func() error {
			_, err := r.cs.ResourceV1().ResourceClaims(Namespace).Create(gctx, c, metav1.CreateOptions{})
			return err
		})
	}
	return g.Wait()
}

// startScheduler runs the configuration's scheduler with a port that
// serves /metrics and /debug/pprof to anyone (it listens on loopback only:
// curl -k https://127.0.0.1:PORT/debug/pprof/profile profiles it), and
// waits until it is ready. The scheduler binds the port it is given
// itself, so a start that finds it taken since it was chosen is made again
// on a new one.
func (r *replay) startScheduler(ctx context.Context) error {
	bin, user := filepath.Join(r.o.BinDir, "kube-scheduler"), "system:kube-scheduler"
	if r.s.gpuadmit {
		bin, user = r.o.Scheduler, "system:serviceaccount:gpuadmit-system:gpuadmit-scheduler"
	}
	var wrap []string
	if r.cpus != nil {
		wrap = r.cpus.wrap()
	}
	_, err := listener.Retry("127.0.0.1", 3, func(port int) error {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		p, err := r.cl.StartSchedulerWrapped(wrap, bin, "scheduler", user, r.s.profile, "--secure-port="+strconv.Itoa(port),
			"--bind-address=127.0.0.1", "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/debug/pprof/*")
		if err != nil {
			return err
		}
		err = until(ctx, 60*time.Second, func() (bool, error) {
			if p.Exited() {
				tail := r.cl.Tail("scheduler", 10)
				return false, listener.Exited(fmt.Errorf("scheduler exited before it was ready:\n%s", tail), tail)
			}
			_, err := admission.Get(ctx, insecure, "https://"+addr+"/readyz")
			return err == nil, nil
		})
		if err != nil {
			p.Stop()
			return err
		}
		r.metrics = "https://" + addr + "/metrics"
		return nil
	})
	return err
}

// until polls cond every 200ms until it holds, fails, ctx ends or timeout passes.
func until(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not done after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// errUnsettled is returned when pods are still being scheduled at the deadline.
var errUnsettled = errors.New("pods still unscheduled at the deadline")
