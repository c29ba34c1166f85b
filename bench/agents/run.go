// Package agents measures N gpuadmit agents publishing against one real
// control plane (gpuadmit-bench agents): the API requests they send in
// steady state and when GPUs change, and the API server's CPU they cost.
package agents

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gpuadmit/gpuadmit/bench/admission"
	"github.com/gpuadmit/gpuadmit/internal/fakegpu"
	"github.com/gpuadmit/gpuadmit/test/e2e/cluster"
)

// Options configure a run; the zero value of each field but Levels has a default.
type Options struct {
	// Levels are the numbers of agents, one control plane each.
	Levels []int
	// GPUs per node; zero means 8.
	GPUs int
	// Reading is the NVML reading the fake GPUs answer as; empty means
	// pkg/allocator/testdata/nvml/h100-80gb-hbm3-raw.txt.
	Reading string
	// Resync is the agents' resync period; zero means a minute, the shipped default.
	Resync time.Duration
	// Steady is how long steady state is measured; zero means two resyncs.
	Steady time.Duration
	// Lose is how many agents lose one GPU in the change phase; zero means 10.
	Lose int
	// Root and BinDir are the repository and the control-plane binaries;
	// empty finds them as gpuadmit-bench admission does.
	Root, BinDir string
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
}

// Level is what one number of agents cost.
type Level struct {
	Agents int
	// SteadyMinutes and ChangeMinutes are how long each phase was measured.
	SteadyMinutes, ChangeMinutes float64
	// Steady and Change are the API requests of each phase.
	Steady, Change Requests
	// SteadyCPU and ChangeCPU are the API server's CPU seconds in each phase.
	SteadyCPU, ChangeCPU float64
	// Lost is how many agents lost a GPU in the change phase.
	Lost int
	// Err is why the level stopped, if it did.
	Err string
}

// Run measures each level on a control plane of its own.
func Run(ctx context.Context, o Options) ([]Level, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	ctrllog.SetLogger(logr.Discard()) // envtest logs through controller-runtime; the API server logs to its file
	r, err := fakegpu.ReadReading(o.Reading)
	if err != nil {
		return nil, err
	}
	var out []Level
	for _, n := range o.Levels {
		l, err := runLevel(ctx, o, r, n)
		if err != nil {
			l.Err = err.Error()
			out = append(out, l)
			return out, fmt.Errorf("%d agents: %w", n, err)
		}
		out = append(out, l)
	}
	return out, nil
}

func (o *Options) defaults() error {
	if len(o.Levels) == 0 {
		return errors.New("no levels")
	}
	if o.GPUs == 0 {
		o.GPUs = 8
	}
	if o.Resync == 0 {
		o.Resync = time.Minute
	}
	if o.Steady == 0 {
		o.Steady = 2 * o.Resync
	}
	if o.Lose == 0 {
		o.Lose = 10
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if err := admission.ControlPlaneDirs(&o.Root, &o.BinDir); err != nil {
		return err
	}
	if o.Reading == "" {
		o.Reading = filepath.Join(o.Root, "pkg/allocator/testdata/nvml/h100-80gb-hbm3-raw.txt")
	}
	return nil
}

func (o *Options) progress(format string, args ...any) {
	fmt.Fprintf(o.Progress, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// runLevel starts a control plane with only etcd and the API server (no
// kubelet or kwok: publishing needs none), n Nodes and n agents, then
// measures steady state and a GPU lost on o.Lose agents.
func runLevel(ctx context.Context, o Options, r fakegpu.Reading, n int) (l Level, err error) {
	l = Level{Agents: n}
	logDir, err := os.MkdirTemp("", "gpuadmit-bench-agents-")
	if err != nil {
		return l, err
	}
	defer func() { // after the control plane stopped: keep its logs only when the level failed
		if err != nil {
			err = fmt.Errorf("%w (logs in %s)", err, logDir)
		} else {
			os.RemoveAll(logDir)
		}
	}()
	o.progress("%d agents: starting the control plane (logs in %s)", n, logDir)
	cl, err := cluster.Start(ctx, cluster.Options{BinDir: o.BinDir, Root: o.Root, LogDir: logDir,
		Skip: []string{"kube-scheduler", "kube-controller-manager", "kwok", "webhook"}})
	if err != nil {
		return l, err
	}
	defer cl.Stop()
	s, err := newScraper(cl)
	if err != nil {
		return l, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	agents, err := startAgents(ctx, o, cl, r, n)
	if err != nil {
		return l, err
	}
	o.progress("%d agents: waiting for every first publish (starts jittered over %s)", n, o.Resync)
	for _, a := range agents {
		select {
		case <-a.started:
		case err := <-a.errs:
			return l, err
		case <-ctx.Done():
			return l, ctx.Err()
		}
	}
	// Let every agent pass one resync after its start before measuring.
	time.Sleep(o.Resync + 5*time.Second)
	o.progress("%d agents: steady state for %s", n, o.Steady)
	if l.Steady, l.SteadyCPU, err = s.over(ctx, o.Steady); err != nil {
		return l, err
	}
	l.SteadyMinutes = o.Steady.Minutes()
	l.Lost = min(o.Lose, n)
	for _, a := range agents[:l.Lost] {
		a.gpus[0].Lost.Store(true)
	}
	change := o.Resync + 10*time.Second
	o.progress("%d agents: one GPU lost on %d of them; measuring %s", n, l.Lost, change)
	if l.Change, l.ChangeCPU, err = s.over(ctx, change); err != nil {
		return l, err
	}
	l.ChangeMinutes = change.Minutes()
	for _, a := range agents {
		select {
		case err := <-a.errs:
			return l, err
		default:
		}
	}
	return l, nil
}

// startAgents creates the Nodes and starts an agent on each.
func startAgents(ctx context.Context, o Options, cl *cluster.Cluster, r fakegpu.Reading, n int) ([]*fakeAgent, error) {
	cs, err := kubernetes.NewForConfig(cl.Config)
	if err != nil {
		return nil, err
	}
	o.progress("%d agents: creating the Nodes", n)
	agents := make([]*fakeAgent, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			name := fmt.Sprintf("gpu-%05d", i)
			node, err := cs.CoreV1().Nodes().Create(ctx, bareNode(name), metav1.CreateOptions{})
			if err != nil {
				errs <- fmt.Errorf("create node %s: %w", name, err)
				return
			}
			a, err := newFakeAgent(cl.Config, name, r, o.GPUs)
			if err != nil {
				errs <- err
				return
			}
			agents[i] = a
			go a.run(ctx, cl.Config, node.UID, o.Resync)
		}()
	}
	wg.Wait()
	close(errs)
	return agents, <-errs
}

// bareNode is a Node as a kubelet registers it, before any agent wrote on it.
func bareNode(name string) *corev1.Node {
	cap := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("1Ti")}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name, "nvidia.com/gpu.present": "true"}},
		Status:     corev1.NodeStatus{Capacity: cap, Allocatable: cap},
	}
}

// scraper reads the API server's request counters and its process's CPU.
type scraper struct {
	cs  *kubernetes.Clientset
	pid int
}

func newScraper(cl *cluster.Cluster) (*scraper, error) {
	cs, err := kubernetes.NewForConfig(cl.Config)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(cl.Config.Host)
	if err != nil {
		return nil, fmt.Errorf("API server address %q: %w", cl.Config.Host, err)
	}
	pid, err := FindProcess("kube-apiserver", "--secure-port="+u.Port())
	if err != nil {
		return nil, err
	}
	return &scraper{cs: cs, pid: pid}, nil
}

// over measures d: the requests and the API server's CPU seconds.
func (s *scraper) over(ctx context.Context, d time.Duration) (Requests, float64, error) {
	before, cpu0, err := s.read(ctx)
	if err != nil {
		return nil, 0, err
	}
	select {
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	case <-time.After(d):
	}
	after, cpu1, err := s.read(ctx)
	if err != nil {
		return nil, 0, err
	}
	return after.Since(before), cpu1 - cpu0, nil
}

func (s *scraper) read(ctx context.Context) (Requests, float64, error) {
	page, err := s.cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("read the API server's /metrics: %w", err)
	}
	req, err := ParseRequests(bytes.NewReader(page))
	if err != nil {
		return nil, 0, err
	}
	cpu, err := ProcessCPU(s.pid)
	return req, cpu, err
}
