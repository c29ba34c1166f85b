package agent

import (
	"context"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/utils/clock"

	"github.com/gpuadmit/gpuadmit/pkg/agent/cdi"
	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// This file exports the pieces of the device-plugin agent that the DRA
// driver (pkg/agent/dra) runs as they are: NVML, the Node publisher and the
// health watcher.

// OpenNVML loads and initializes the driver's NVML, from c's driver root
// when it has one, else the one the dynamic loader finds; the returned
// func shuts it down.
func OpenNVML(c cdi.Options) (nvml.Interface, func(), error) { return openNVML(c) }

// NodePublisher writes a node's GPUs on its Node: the gpuadmit.io/gpus
// annotation and the accounting capacity, which the inventory and quotas
// read in both modes.
type NodePublisher struct{ p publisher }

// NewNodePublisher returns a publisher for the Node called node, in DRA
// mode: its accounting capacity is DRAAccounting's.
func NewNodePublisher(c NodeClient, node string) *NodePublisher {
	return &NodePublisher{p: publisher{client: c, node: node, accounting: DRAAccounting}}
}

// Publish writes gpus on the Node, with no share offer: a DRA node serves
// no device-plugin shares.
func (n *NodePublisher) Publish(ctx context.Context, gpus []GPU) error {
	return n.p.publish(ctx, gpus, allocator.ShareOffer{}, false)
}

// WatchHealth reports each GPU that turns unhealthy (a critical XID, lost)
// or healthy again (answering and quiet for recoverAfter) to onChange,
// until ctx ends. A nil clock is the real one.
func WatchHealth(ctx context.Context, nv NVML, recoverAfter time.Duration, clk clock.Clock, onChange func(uuid string, healthy bool)) error {
	if clk == nil {
		clk = clock.RealClock{}
	}
	w := &healthWatcher{
		nvml: nv, clock: clk, wait: healthWait, probeEvery: probeEvery,
		recoverAfter: recoverAfter, onChange: onChange,
	}
	return w.run(ctx)
}
