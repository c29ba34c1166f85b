package admission

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuadmit/gpuadmit/internal/listener"
	"github.com/gpuadmit/gpuadmit/test/e2e/cluster"
)

// Namespace holds the benchmark's pods; it has no labels.
const Namespace = "bench"

// bench is a run in progress.
type bench struct {
	opts    Options
	cl      *cluster.Cluster
	cs      kubernetes.Interface
	opa     *opaServer
	noop    *child
	hooks   *webhooks
	scr     scraper
	clients []kubernetes.Interface
	nodes   []corev1.Node
	// replayFile is where captureReplay writes the patch the no-op server
	// answers with at ReplayPath.
	replayFile string
}

// Run starts the control plane, measures every configuration at every
// level and returns the report. It fails on a broken setup, never on a
// number: errors of individual Creates are counted in the results.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	rep := &Report{Started: time.Now().UTC(), Machine: machine(), Versions: versions(opts), Settings: Settings{
		Levels: opts.Levels, PodsPerLevel: opts.Pods / opts.Rounds * opts.Rounds, Rounds: opts.Rounds,
		Nodes: opts.Nodes, Configs: opts.Configs, PodShapes: opts.Mix.shapeCount(), Mix: opts.Mix, PodEvents: opts.PodEvents,
	}}
	logDir, cleanup, err := logDirOf(opts.LogDir)
	if err != nil {
		return nil, err
	}
	b := &bench{opts: opts}
	defer b.stop()
	if err := b.start(ctx, logDir); err != nil {
		return nil, fmt.Errorf("%w (logs in %s)", err, logDir)
	}
	if err := b.measure(ctx, rep); err != nil {
		return nil, fmt.Errorf("%w (logs in %s)", err, logDir)
	}
	rep.Finished, rep.Machine.LoadAfter = time.Now().UTC(), loadavg()
	cleanup()
	return rep, nil
}

func logDirOf(dir string) (string, func(), error) {
	if dir != "" {
		return dir, func() {}, os.MkdirAll(dir, 0o755)
	}
	dir, err := os.MkdirTemp("", "gpuadmit-bench-admission-")
	return dir, func() { os.RemoveAll(dir) }, err
}

func (b *bench) progress(format string, args ...any) {
	fmt.Fprintf(b.opts.Progress, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// start brings up the control plane (without scheduler and kwok: pods need
// not run, and neither should compete for the CPUs) with gpuadmit's webhook
// as its own process, the nodes, the no-op server and OPA.
func (b *bench) start(ctx context.Context, logDir string) error {
	bin := b.opts.WebhookBinary
	if bin == "" {
		b.progress("building cmd/webhook into %s", logDir)
		var err error
		if bin, err = buildWebhook(ctx, b.opts.Root, logDir); err != nil {
			return err
		}
	} else {
		var err error
		if bin, err = linkWebhook(bin, logDir); err != nil {
			return err
		}
	}
	b.progress("starting the control plane (logs in %s)", logDir)
	cl, err := cluster.Start(ctx, cluster.Options{BinDir: b.opts.BinDir, Root: b.opts.Root, LogDir: logDir,
		Skip: []string{"kube-scheduler", "kwok"}, PodEvents: b.opts.PodEvents, WebhookBinary: bin, WebhookPprof: b.opts.WebhookPprof})
	if err != nil {
		return err
	}
	b.cl = cl
	if b.cs, err = kubernetes.NewForConfig(cl.Config); err != nil {
		return err
	}
	if err := b.setup(ctx); err != nil {
		return fmt.Errorf("step setup: %w", err)
	}
	host, gpuadmitPort, certDir, ca := cl.Serving()
	urls := map[string]string{Gpuadmit: fmt.Sprintf("https://%s/mutate-v1-pod", net.JoinHostPort(host, strconv.Itoa(gpuadmitPort)))}
	b.scr = scraper{cs: b.cs, servers: map[string]func(context.Context) (families, error){
		Gpuadmit: scraperOf(cl.WebhookMetricsURL()),
	}}
	if slices.Contains(b.opts.Configs, Noop) || slices.Contains(b.opts.Configs, Patch) || slices.Contains(b.opts.Configs, Replay) {
		b.replayFile = filepath.Join(logDir, "replay-patch.json")
		if err := b.startNoop(host, certDir, ca, logDir, urls); err != nil {
			return fmt.Errorf("step no-op webhook: %w", err)
		}
	}
	if slices.Contains(b.opts.Configs, OPA) {
		if err := b.startOPA(ctx, host, certDir, ca, logDir, urls); err != nil {
			return fmt.Errorf("step opa: %w", err)
		}
		b.scr.servers[OPA] = b.opa.families
	}
	b.hooks = &webhooks{cs: b.cs, urls: urls, calls: b.scr.calls, probe: func(ctx context.Context) error {
		_, err := createOne(ctx, b.cs, Namespace, "probe", 0, true)
		return err
	}}
	if err := b.hooks.takeTemplate(ctx, "gpuadmit"); err != nil {
		return err
	}
	if b.clients, err = NewClients(cl.Config, slices.Max(b.opts.Levels)); err != nil {
		return err
	}
	return nil
}

// startNoop starts the no-op webhook; it binds the ports it is given
// itself, so a start that finds one taken is made again on new ones.
func (b *bench) startNoop(host, certDir string, ca []byte, logDir string, urls map[string]string) error {
	var metricsURL string
	port, err := listener.Retry(host, 3, func(port int) (err error) {
		b.noop, metricsURL, err = startNoop(host, port, certDir, ca, logDir, b.replayFile)
		return err
	})
	if err != nil {
		return err
	}
	for config, path := range map[string]string{Noop: NoopPath, Patch: PatchPath, Replay: ReplayPath} {
		urls[config] = fmt.Sprintf("https://%s%s", net.JoinHostPort(host, strconv.Itoa(port)), path)
		b.scr.servers[config] = scraperOf(metricsURL)
	}
	return nil
}

// startOPA starts OPA with the cluster's data; OPA binds the port it is
// given itself, so a start that finds it taken is made again on a new one.
func (b *bench) startOPA(ctx context.Context, host, certDir string, ca []byte, logDir string, urls map[string]string) error {
	_, err := listener.Retry(host, 3, func(port int) (err error) {
		b.opa, err = startOPA(b.opts.OPA, host, port, certDir, ca, logDir)
		return err
	})
	if err != nil {
		return err
	}
	ns := corev1.Namespace{}
	ns.Name = Namespace
	pcs, err := b.cs.SchedulingV1().PriorityClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	data, err := ClusterData(b.nodes, []corev1.Namespace{ns}, pcs.Items)
	if err != nil {
		return err
	}
	if err := b.opa.put(ctx, "cluster", data); err != nil {
		return err
	}
	urls[OPA] = b.opa.base + OPAPath
	return nil
}

// setup creates the PriorityClasses the default policies name, the
// benchmark namespace with its default ServiceAccount, and the nodes.
func (b *bench) setup(ctx context.Context) error {
	if err := b.cl.Apply(ctx, filepath.Join(b.opts.Root, "deploy/base/priorityclasses.yaml")); err != nil {
		return err
	}
	if err := CreateNamespace(ctx, b.cs, Namespace); err != nil {
		return err
	}
	b.nodes = Nodes(b.opts.Nodes)
	b.progress("adding %d GPU nodes", len(b.nodes))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := range b.nodes {
		g.Go(func() error { return b.cl.AddNode(gctx, b.nodes[i].DeepCopy()) })
	}
	return g.Wait()
}

func scraperOf(url string) func(context.Context) (families, error) {
	return func(ctx context.Context) (families, error) { return scrape(ctx, url) }
}

func (b *bench) stop() {
	if b.opa != nil {
		b.opa.stop()
	}
	if b.noop != nil {
		b.noop.stop()
	}
	if b.cl != nil {
		b.cl.Stop()
	}
}

// measure compares gpuadmit's and OPA's mutations, then runs every
// configuration at every level, round by round.
func (b *bench) measure(ctx context.Context, rep *Report) error {
	var err error
	if rep.Equivalence, err = b.equivalence(ctx); err != nil {
		return err
	}
	if slices.Contains(b.opts.Configs, Replay) {
		if rep.Replay, err = b.captureReplay(ctx); err != nil {
			return fmt.Errorf("step replay patch: %w", err)
		}
	}
	perRound := b.opts.Pods / b.opts.Rounds
	for li, level := range b.opts.Levels {
		results := map[string]*Result{}
		for _, c := range b.opts.Configs {
			results[c] = &Result{Config: c, Level: level}
		}
		for round := range b.opts.Rounds {
			for _, c := range rotate(b.opts.Configs, round+li) {
				rep.Settings.Sequence = append(rep.Settings.Sequence, fmt.Sprintf("%d/%d/%s", level, round, c))
				if err := b.runOne(ctx, results[c], round, perRound); err != nil {
					return fmt.Errorf("%s at %d clients, round %d: %w", c, level, round, err)
				}
			}
		}
		for _, c := range b.opts.Configs {
			results[c].summarise()
			rep.Results = append(rep.Results, *results[c])
		}
	}
	return nil
}

func rotate(s []string, n int) []string {
	n %= len(s)
	return append(slices.Clone(s[n:]), s[:n]...)
}

// runOne registers the configuration, warms up with dry-run creates,
// measures one round between two metric snapshots, unregisters, and clears
// the pods (and gpuadmit's Events) away so every round starts alike.
func (b *bench) runOne(ctx context.Context, res *Result, round, pods int) error {
	if err := b.hooks.register(ctx, res.Config); err != nil {
		return err
	}
	clients := b.clients[:res.Level]
	// Warm-up pods are named apart from every other pod of the run, so that
	// under MixDistinct none looks like a measured pod to gpuadmit's memo.
	Load{Namespace: Namespace, Prefix: fmt.Sprintf("warmup-%s-%d-r%d", res.Config, res.Level, round),
		Pods: 2 * res.Level, Clients: clients, DryRun: true, Mix: b.opts.Mix}.Run(ctx)
	before, err := b.scr.snapshot(ctx)
	if err != nil {
		return err
	}
	stopProfile, err := b.profile(ctx, res, round)
	if err != nil {
		return err
	}
	cpuBefore := readCPU()
	out := Load{Namespace: Namespace, Prefix: fmt.Sprintf("%s-%d-r%d", res.Config, res.Level, round),
		First: round * pods, Pods: pods, Clients: clients, Mix: b.opts.Mix}.Run(ctx)
	cpuAfter := readCPU()
	res.CPU.add(cpuBefore, cpuAfter)
	roundCPU, roundTotal := roundUse(cpuBefore, cpuAfter, pods)
	if err := stopProfile(); err != nil {
		return err
	}
	after, err := b.scr.snapshot(ctx)
	if err != nil {
		return err
	}
	res.addDelta(before, after)
	res.samples = append(res.samples, out.Latencies...)
	res.Pods += pods
	res.Errors += len(out.Errors)
	for _, e := range out.Errors {
		if len(res.ErrorLines) < 5 {
			res.ErrorLines = append(res.ErrorLines, e)
		}
	}
	res.Mutated += out.Mutated
	res.Seconds += out.Wall.Seconds()
	lat := latencyOf(out.Latencies)
	res.Rounds = append(res.Rounds, Round{Round: round, Pods: pods, Errors: len(out.Errors), Seconds: out.Wall.Seconds(),
		Throughput: float64(len(out.Latencies)) / out.Wall.Seconds(), P50Ms: lat.P50Ms, P99Ms: lat.P99Ms, Load: loadavg(),
		CPUMsPerPod: roundCPU, CPUTotalMsPerPod: roundTotal})
	b.progress("%-8s %3d clients round %d: %d pods, %d errors, %.0f pods/s, p50 %.1f ms, p99 %.1f ms (load %s)",
		res.Config, res.Level, round, pods, len(out.Errors), float64(len(out.Latencies))/out.Wall.Seconds(), lat.P50Ms, lat.P99Ms, loadavg())
	if err := b.hooks.unregister(ctx, res.Config); err != nil {
		return err
	}
	return b.clear(ctx)
}

// profile starts a CPU profile of the round when Options.ProfileDir asks
// for one, and one of kube-apiserver when Options.APIServerProfile does;
// the function it returns ends the first and waits for the second.
func (b *bench) profile(ctx context.Context, res *Result, round int) (func() error, error) {
	if b.opts.ProfileDir == "" {
		return func() error { return nil }, nil
	}
	if err := os.MkdirAll(b.opts.ProfileDir, 0o755); err != nil {
		return nil, err
	}
	name := func(who string) string {
		return filepath.Join(b.opts.ProfileDir, fmt.Sprintf("%s-%s-%d-r%d.pprof", who, res.Config, res.Level, round))
	}
	f, err := os.Create(name("cpu"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	// kube-apiserver's profile, and gpuadmit's where it serves one.
	var fetches []func() error
	if secs := b.opts.APIServerProfile; secs > 0 {
		fetches = append(fetches, func() error {
			body, err := b.cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
				Param("seconds", strconv.Itoa(secs)).Timeout(time.Duration(secs+30) * time.Second).DoRaw(ctx)
			if err != nil {
				return fmt.Errorf("kube-apiserver profile: %w", err)
			}
			return os.WriteFile(name("apiserver"), body, 0o644)
		})
		if res.Config == Gpuadmit && b.opts.WebhookPprof != "" {
			fetches = append(fetches, func() error {
				body, err := Get(ctx, http.DefaultClient, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", b.opts.WebhookPprof, secs))
				if err != nil {
					return fmt.Errorf("gpuadmit profile: %w", err)
				}
				return os.WriteFile(name("gpuadmit"), body, 0o644)
			})
		}
	}
	var g errgroup.Group
	for _, f := range fetches {
		g.Go(f)
	}
	return func() error {
		pprof.StopCPUProfile()
		f.Close()
		return g.Wait()
	}, nil
}

// clear deletes the round's pods and, once gpuadmit's Events stop arriving, the Events.
func (b *bench) clear(ctx context.Context) error {
	pods := b.cs.CoreV1().Pods(Namespace)
	zero := int64(0)
	if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("delete pods: %w", err)
	}
	if err := until(ctx, time.Minute, func() (bool, error) {
		l, err := pods.List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(l.Items) == 0, err
	}); err != nil {
		return fmt.Errorf("pods not gone: %w", err)
	}
	events := b.cs.CoreV1().Events(Namespace)
	last := -1
	if err := until(ctx, time.Minute, func() (bool, error) {
		l, err := events.List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err
		}
		settled := len(l.Items) == last
		last = len(l.Items)
		return settled, nil
	}); err != nil {
		return fmt.Errorf("events still arriving: %w", err)
	}
	return events.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
}

// until polls cond every half second until it holds, fails, or timeout passes.
func until(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// equivalence dry-runs every pod shape under gpuadmit and under OPA and compares the mutations.
func (b *bench) equivalence(ctx context.Context) ([]Equivalence, error) {
	if !slices.Contains(b.opts.Configs, Gpuadmit) || !slices.Contains(b.opts.Configs, OPA) {
		return nil, nil
	}
	got := map[string][]Mutation{}
	for _, c := range []string{Gpuadmit, OPA} {
		if err := b.hooks.register(ctx, c); err != nil {
			return nil, err
		}
		for i := range shapes {
			p, err := createOne(ctx, b.cs, Namespace, fmt.Sprintf("shape-%02d", i), i, true)
			if err != nil {
				return nil, fmt.Errorf("%s, pod shape %d: %w", c, i, err)
			}
			got[c] = append(got[c], MutationOf(p))
		}
		if err := b.hooks.unregister(ctx, c); err != nil {
			return nil, err
		}
	}
	out := make([]Equivalence, len(shapes))
	for i := range shapes {
		out[i] = Equivalence{Pod: shapes[i].String(), Gpuadmit: got[Gpuadmit][i], OPA: got[OPA][i], Diff: got[Gpuadmit][i].Diff(got[OPA][i])}
	}
	return out, nil
}

// CreateNamespace creates the benchmark's namespace and its default
// ServiceAccount, unless kube-controller-manager, where it runs, made
// that first.
func CreateNamespace(ctx context.Context, cs kubernetes.Interface, name string) error {
	ns := &corev1.Namespace{}
	ns.Name = name
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return err
	}
	sa := &corev1.ServiceAccount{}
	sa.Name, sa.Namespace = "default", name
	if _, err := cs.CoreV1().ServiceAccounts(name).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
