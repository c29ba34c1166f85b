package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// NVML is the part of NVML the agent uses; nvml.Interface satisfies it.
type NVML interface {
	DeviceLister
	EventSetCreator
}

// healthWait is one NVML event wait: how late the health watcher sees ctx end.
const healthWait = 5 * time.Second

// probeEvery is how often every GPU is asked whether it is still there.
const probeEvery = 10 * time.Second

// Agent ties discovery, health, the Node and the device plugin together. It
// holds the one current list of GPUs; every change to it goes to the plugin
// and to the Node.
type Agent struct {
	opts      Options
	discover  Discoverer
	health    *healthWatcher
	publisher *publisher
	plugin    *Plugin
	server    *server

	mu    sync.Mutex
	gpus  []GPU
	sick  map[string]bool // UUIDs the health watcher holds unhealthy
	dirty chan struct{}   // holds one token when the Node needs writing
	// mps and mpsUnit are, under MPS, the limits the control daemon holds
	// and the share size they must be (readMPSLimits).
	mps     MPSLimits
	mpsUnit int64
}

// New returns an agent; nodes writes the Node.
func New(nv NVML, nodes NodeClient, o Options) *Agent {
	o.defaults()
	a := &Agent{
		opts:      o,
		discover:  Discoverer{NVML: nv, Names: o.ProfileNames},
		publisher: &publisher{client: nodes, node: o.NodeName},
		sick:      map[string]bool{},
		dirty:     make(chan struct{}, 1),
	}
	a.plugin = newPlugin(o.SharesPerGPU, o.mpsRoot())
	a.health = &healthWatcher{
		nvml: nv, clock: o.Clock, wait: healthWait, probeEvery: probeEvery,
		recoverAfter: o.RecoverAfter, onChange: a.setHealth,
	}
	a.server = &server{
		plugin: a.plugin, dir: o.PluginDir, socket: o.socketName(), resource: o.Resource,
		retry: o.Retry, clock: o.Clock,
	}
	return a
}

// Run discovers the GPUs, then serves the plugin, watches health, writes the
// Node and resyncs until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	if a.opts.NodeName == "" {
		return fmt.Errorf("no node name: set NODE_NAME from the downward API")
	}
	gpus, err := a.discover.Discover()
	if err != nil {
		return fmt.Errorf("discover GPUs: %w", err)
	}
	logf.FromContext(ctx).Info("Discovered GPUs", "count", len(gpus), "capacity", Accounting(gpus))
	if err := a.writeSpec(gpus); err != nil {
		return fmt.Errorf("CDI spec of the GPUs: %w", err)
	}
	a.setGPUs(gpus)
	g, ctx := errgroup.WithContext(ctx)
	if !a.opts.PublishOnly {
		g.Go(func() error { return a.server.run(ctx) })
	}
	g.Go(func() error { return a.health.run(ctx) })
	g.Go(func() error { return a.publishLoop(ctx) })
	g.Go(func() error { return a.resyncLoop(ctx) })
	return g.Wait()
}

// GPUs returns a copy of the current GPUs.
func (a *Agent) GPUs() []GPU {
	a.mu.Lock()
	defer a.mu.Unlock()
	return cloneGPUs(a.gpus)
}

// setGPUs takes a fresh discovery. A GPU is healthy when discovery could
// read it and the health watcher does not hold it unhealthy: discovery only
// sees that a GPU answers, not that it had a critical XID.
func (a *Agent) setGPUs(gpus []GPU) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gpus = cloneGPUs(gpus)
	a.readMPSLimits()
	for i := range a.gpus {
		a.gpus[i].Healthy = a.healthy(a.gpus[i])
	}
	a.changed()
}

// setHealth is the health watcher's report on one GPU.
func (a *Agent) setHealth(uuid string, healthy bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if healthy {
		delete(a.sick, uuid)
	} else {
		a.sick[uuid] = true
	}
	for i := range a.gpus {
		if a.gpus[i].UUID == uuid {
			a.gpus[i].Healthy = a.healthy(a.gpus[i])
		}
	}
	a.changed()
}

// healthy reports whether discovery read g, the watcher holds it well and,
// under MPS, the control daemon holds its clients to one share; a.mu is held.
func (a *Agent) healthy(g GPU) bool {
	return g.Error == "" && !a.sick[g.UUID] && a.mpsReady(g)
}

// readMPSLimits reads, under MPS, the limits the control daemon holds and
// the share size they must be; a.mu is held. It runs with every discovery
// (at start and every resync), so a GPU serves once the daemon set its
// limit, at most a resync after.
func (a *Agent) readMPSLimits() {
	root := a.opts.mpsRoot()
	if root == "" {
		return
	}
	limits, err := readMPSLimits(root)
	if err != nil {
		limits = MPSLimits{} // unreadable: hold every GPU until it is readable
	}
	a.mps, a.mpsUnit = limits, shareUnitMiB(a.gpus, int(a.opts.SharesPerGPU))
}

// mpsReady reports whether g may serve MPS clients: MPS is off, g serves
// no shares, or the daemon holds g's clients to the share size. Until then
// its devices go to the kubelet unhealthy, so no pod is sent to a node
// whose daemon is not ready (Allocate would refuse it, and the kubelet
// would fail that pod for good); a.mu is held.
func (a *Agent) mpsReady(g GPU) bool {
	if a.opts.mpsRoot() == "" || !g.Shares() {
		return true
	}
	got, ok := a.mps[g.UUID]
	return ok && got == a.mpsUnit
}

// changed hands the GPUs to the plugin and asks for a Node write; a.mu is held.
func (a *Agent) changed() {
	a.plugin.SetGPUs(cloneGPUs(a.gpus))
	a.markDirty()
}

func (a *Agent) markDirty() {
	select {
	case a.dirty <- struct{}{}:
	default: // a write is already due; it will carry this change
	}
}

// publishLoop writes the Node whenever it is dirty, retrying failures.
func (a *Agent) publishLoop(ctx context.Context) error {
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-a.dirty:
		case <-retry:
		}
		retry = nil
		gpus := a.GPUs()
		offer, ok := shareOffer(gpus, a.opts.Resource, a.opts.SharesPerGPU)
		ok = ok && !a.opts.PublishOnly
		if err := a.publisher.publish(ctx, gpus, offer, ok); err != nil {
			logf.FromContext(ctx).Error(err, "Writing the Node; retrying", "after", a.opts.Retry)
			retry = a.opts.Clock.After(a.opts.Retry)
		}
	}
}

// resyncLoop rediscovers the GPUs and writes the Node again (it may have
// been recreated, or edited) every Resync.
func (a *Agent) resyncLoop(ctx context.Context) error {
	t := a.opts.Clock.NewTicker(a.opts.Resync)
	defer t.Stop()
	log := logf.FromContext(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
		if gpus, err := a.discover.Discover(); err != nil {
			log.Error(err, "Rediscovering GPUs; keeping the last discovery")
		} else {
			if err := a.writeSpec(gpus); err != nil {
				log.Error(err, "Writing the CDI spec of the GPUs")
			}
			a.setGPUs(gpus)
		}
		a.markDirty()
	}
}
