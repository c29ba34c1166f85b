package dra

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gpuadmit/gpuadmit/pkg/agent"
	"github.com/gpuadmit/gpuadmit/pkg/agent/cdi"
)

// Options configure the agent in DRA mode. Only NodeName is required.
type Options struct {
	// NodeName is the node the agent runs on (the downward API's spec.nodeName).
	NodeName string
	// Driver configures the DRA plugin and its directories.
	Driver DriverOptions
	// CDI says where the node's driver is; Run makes Driver.CDI from it.
	CDI cdi.Options
	// RegistrarDir is where the kubelet finds plugins to register; empty
	// means /var/lib/kubelet/plugins_registry.
	RegistrarDir string
	// Resync is how often GPUs are rediscovered and everything published
	// again; zero means a minute.
	Resync time.Duration
	// RecoverAfter is how long a GPU must stay quiet after a critical XID to
	// be healthy again; zero means 5 minutes.
	RecoverAfter time.Duration
	// ProfileNames reads MIG profile names from NVML; nil names them from
	// the catalog, except that Run uses real hardware's NVMLProfileName.
	ProfileNames agent.ProfileNamer
	// OpenNVML opens the node's NVML for Run; nil loads the driver's
	// (agent.OpenNVML). Only a test build sets it (cmd/agent under the
	// build tag gpuadmit_fakenvml).
	OpenNVML agent.NVMLOpener
	// MIGUUIDs reads MIG device UUIDs; nil publishes MIG devices without
	// them (go-nvml's mocks cannot serve the query). Run sets ReadMIGUUIDs.
	MIGUUIDs func(agent.DeviceLister) (map[InstanceKey]string, error)
	// PublishOnly serves no kubelet (no registration, no DRA gRPC service):
	// for a control plane without kubelets, as in the e2e tests.
	PublishOnly bool
}

func (o *Options) defaults() {
	if o.RegistrarDir == "" {
		o.RegistrarDir = DefaultRegistrarDir
	}
	if o.Resync <= 0 {
		o.Resync = time.Minute
	}
	if o.RecoverAfter <= 0 {
		o.RecoverAfter = 5 * time.Minute
	}
	o.Driver.defaults()
}

// Node is the agent in DRA mode on one node: discovery and health feed the
// driver's ResourceSlices and the Node's annotation and accounting capacity.
type Node struct {
	opts      Options
	nvml      agent.NVML
	discover  agent.Discoverer
	publisher *agent.NodePublisher
	kube      kubernetes.Interface

	health *healthSet
	dirty  chan struct{}
}

// New returns the DRA agent. nodes writes the Node; kube publishes
// ResourceSlices and reads claims.
func New(nv agent.NVML, nodes agent.NodeClient, kube kubernetes.Interface, o Options) *Node {
	o.defaults()
	return &Node{
		opts: o, nvml: nv, kube: kube,
		discover:  agent.Discoverer{NVML: nv, Names: o.ProfileNames},
		publisher: agent.NewNodePublisher(nodes, o.NodeName),
		health:    &healthSet{bad: map[string]bool{}},
		dirty:     make(chan struct{}, 1),
	}
}

// Run starts the driver, then publishes, watches health and resyncs until
// ctx ends.
func (n *Node) Run(ctx context.Context) error {
	if n.opts.NodeName == "" {
		return fmt.Errorf("no node name: set NODE_NAME from the downward API")
	}
	driver, err := NewDriver(n.opts.Driver)
	if err != nil {
		return err
	}
	// Know the devices before the kubelet can call: after a reboot it
	// prepares its claims again at once, and their specs are rewritten
	// from the devices.
	if gpus, migUUIDs, err := n.gpus(); err == nil {
		driver.SetGPUs(gpus, migUUIDs)
	}
	n.release(ctx, driver)
	helper, err := kubeletplugin.Start(ctx, driver, n.pluginOptions()...)
	if err != nil {
		return fmt.Errorf("start DRA plugin: %w", err)
	}
	defer helper.Stop()
	n.markDirty()
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return n.publishLoop(ctx, driver, helper) })
	g.Go(func() error { return agent.WatchHealth(ctx, n.nvml, n.opts.RecoverAfter, nil, n.setHealth) })
	g.Go(func() error { return n.resyncLoop(ctx, driver) })
	return g.Wait()
}

// release frees what claims deleted while the agent was down still hold.
func (n *Node) release(ctx context.Context, driver *Driver) {
	log := logf.FromContext(ctx)
	gone, err := driver.ReleaseDeleted(ctx, n.kube)
	if err != nil {
		log.Error(err, "Releasing deleted claims; trying again at the next resync")
	}
	if len(gone) > 0 {
		log.Info("Released claims deleted from the API", "claims", gone)
	}
}

func (n *Node) pluginOptions() []kubeletplugin.Option {
	return []kubeletplugin.Option{
		kubeletplugin.DriverName(DriverName), kubeletplugin.NodeName(n.opts.NodeName),
		kubeletplugin.KubeClient(n.kube), kubeletplugin.PluginDataDirectoryPath(n.opts.Driver.DataDir),
		kubeletplugin.RegistrarDirectoryPath(n.opts.RegistrarDir), kubeletplugin.HealthService(false),
		kubeletplugin.RegistrationService(!n.opts.PublishOnly), kubeletplugin.DRAService(!n.opts.PublishOnly),
	}
}

// publishLoop discovers the GPUs and publishes them whenever something
// changed: the driver's slices, then the Node. A failed round is retried
// at the next resync.
func (n *Node) publishLoop(ctx context.Context, driver *Driver, helper *kubeletplugin.Helper) error {
	log := logf.FromContext(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-n.dirty:
		}
		gpus, migUUIDs, err := n.gpus()
		if err != nil {
			log.Error(err, "Discovering GPUs; keeping what is published")
			continue
		}
		devs := driver.SetGPUs(gpus, migUUIDs)
		if err := helper.PublishResources(ctx, Resources(n.opts.NodeName, devs)); err != nil {
			log.Error(err, "Publishing ResourceSlices")
		}
		if err := n.publisher.Publish(ctx, gpus); err != nil {
			log.Error(err, "Writing the Node")
		}
		log.V(2).Info("Published", "devices", len(devs), "capacity", agent.DRAAccounting(gpus))
	}
}

// gpus is a fresh discovery with the health watcher's verdicts, and the
// MIG device UUIDs when a GPU has MIG on. A GPU is healthy when discovery
// read it and the watcher does not hold it sick, as in device-plugin mode.
func (n *Node) gpus() ([]agent.GPU, map[InstanceKey]string, error) {
	gpus, err := n.discover.Discover()
	if err != nil {
		return nil, nil, fmt.Errorf("discover GPUs: %w", err)
	}
	for i := range gpus {
		gpus[i].Healthy = gpus[i].Error == "" && !n.health.isBad(gpus[i].UUID)
	}
	if n.opts.MIGUUIDs == nil || !slices.ContainsFunc(gpus, func(g agent.GPU) bool { return !g.Shares() }) {
		return gpus, nil, nil
	}
	uuids, err := n.opts.MIGUUIDs(n.nvml)
	if err != nil {
		return nil, nil, fmt.Errorf("read MIG devices: %w", err)
	}
	return gpus, uuids, nil
}

// releaseEvery is how many resyncs pass between two rounds of
// ReleaseDeleted after the one at start: a round is a GET per prepared
// claim, and a claim deleted while the agent ran is unprepared by the
// kubelet anyway; the rounds catch what it could not deliver.
const releaseEvery = 10

func (n *Node) resyncLoop(ctx context.Context, driver *Driver) error {
	t := time.NewTicker(n.opts.Resync)
	defer t.Stop()
	ticks := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			n.markDirty()
			if ticks++; ticks%releaseEvery == 0 {
				n.release(ctx, driver)
			}
		}
	}
}

// setHealth is the health watcher's report on one GPU.
func (n *Node) setHealth(uuid string, healthy bool) {
	n.health.set(uuid, !healthy)
	n.markDirty()
}

func (n *Node) markDirty() {
	select {
	case n.dirty <- struct{}{}:
	default: // a round is already due
	}
}

// healthSet is the GPUs the health watcher found unhealthy, by UUID.
type healthSet struct {
	mu  sync.Mutex
	bad map[string]bool
}

func (h *healthSet) set(uuid string, bad bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.bad[uuid] = bad
}

func (h *healthSet) isBad(uuid string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bad[uuid]
}
