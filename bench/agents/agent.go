package agents

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpuadmit/gpuadmit/internal/fakegpu"
	"github.com/gpuadmit/gpuadmit/pkg/agent"
	"github.com/gpuadmit/gpuadmit/pkg/agent/dra"
)

// fakeAgent is one node's agent in DRA mode, as pkg/agent/dra's Node runs
// it, without the kubelet plugin: the same discovery (on fake GPUs that
// answer as the real readings), the same ResourceSlice controller the
// kubelet plugin helper starts, and the same Node publisher, on a client
// of its own (its own rate limiter, as a real agent has).
type fakeAgent struct {
	node    string
	gpus    []*fakegpu.Device
	disc    agent.Discoverer
	nodes   *agent.NodePublisher
	slices  *resourceslice.Controller
	errs    chan error
	started chan struct{}
}

// lister is NVML's device list over fake GPUs.
type lister []*fakegpu.Device

func (l lister) DeviceGetCount() (int, nvml.Return) { return len(l), nvml.SUCCESS }

func (l lister) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	if i < 0 || i >= len(l) {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return l[i], nvml.SUCCESS
}

func newFakeAgent(cfg *rest.Config, node string, r fakegpu.Reading, gpus int) (*fakeAgent, error) {
	cfg = rest.CopyConfig(cfg) // its own rate limiter: client-go makes one per client
	nodes, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("API client of %s: %w", node, err)
	}
	a := &fakeAgent{node: node, nodes: agent.NewNodePublisher(nodes, node), errs: make(chan error, 1), started: make(chan struct{})}
	for i := range gpus {
		a.gpus = append(a.gpus, r.Device(fmt.Sprintf("GPU-%s-%d", node, i)))
	}
	a.disc = agent.Discoverer{NVML: lister(a.gpus), Names: r.ProfileName}
	return a, nil
}

// run waits a random part of resync (agents of a DaemonSet start at
// different times), starts the ResourceSlice controller and publishes, then
// publishes again every resync, as the shipped agent's resync loop does,
// until ctx ends.
func (a *fakeAgent) run(ctx context.Context, cfg *rest.Config, uid types.UID, resync time.Duration) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(rand.N(resync)):
	}
	kube, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		a.report(fmt.Errorf("API client of %s: %w", a.node, err))
		return
	}
	owner := &resourceslice.Owner{APIVersion: "v1", Kind: "Node", Name: a.node, UID: uid}
	res, err := a.resources()
	if err != nil {
		a.report(err)
		return
	}
	a.slices, err = resourceslice.StartController(ctx, resourceslice.Options{
		DriverName: dra.DriverName, KubeClient: kube, Owner: owner, Resources: res,
		ErrorHandler: func(_ context.Context, err error, msg string) { a.report(fmt.Errorf("%s: %s: %w", a.node, msg, err)) },
	})
	if err != nil {
		a.report(fmt.Errorf("ResourceSlice controller of %s: %w", a.node, err))
		return
	}
	defer a.slices.Stop()
	a.publish(ctx, false)
	close(a.started)
	t := time.NewTicker(resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.publish(ctx, true)
		}
	}
}

// resources is a fresh discovery as the driver publishes it.
func (a *fakeAgent) resources() (*resourceslice.DriverResources, error) {
	gpus, err := a.disc.Discover()
	if err != nil {
		return nil, fmt.Errorf("discover GPUs of %s: %w", a.node, err)
	}
	res := dra.Resources(a.node, dra.Devices(gpus, dra.DeviceOptions{}))
	return &res, nil
}

// publish is one round of the DRA agent's publishLoop: discover, the
// slices, then the Node.
func (a *fakeAgent) publish(ctx context.Context, slices bool) {
	gpus, err := a.disc.Discover()
	if err != nil {
		a.report(fmt.Errorf("discover GPUs of %s: %w", a.node, err))
		return
	}
	if slices {
		res := dra.Resources(a.node, dra.Devices(gpus, dra.DeviceOptions{}))
		a.slices.Update(&res)
	}
	if err := a.nodes.Publish(ctx, gpus); err != nil {
		a.report(err)
	}
}

// report keeps the first error; the run reads it at the end.
func (a *fakeAgent) report(err error) {
	select {
	case a.errs <- err:
	default:
	}
}
