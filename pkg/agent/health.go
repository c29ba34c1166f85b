package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/utils/clock"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// applicationXID reports whether an XID is one a workload causes (a bad
// kernel, a page fault, a preempted context), which NVIDIA's device plugin
// skips too: the GPU is fine for the next container.
func applicationXID(xid uint64) bool {
	switch xid {
	case 13, 31, 43, 45, 68, 109:
		return true
	}
	return false
}

// healthWatcher marks a GPU unhealthy on a critical XID or when NVML says it
// is lost, and healthy again once it answers and has been quiet for
// recoverAfter: NVML sends no event when a GPU recovers (after a reset, say),
// so recovery is probed.
type healthWatcher struct {
	nvml         NVML
	clock        clock.Clock
	wait         time.Duration // one event wait; also bounds how late ctx is seen
	probeEvery   time.Duration
	recoverAfter time.Duration
	onChange     func(uuid string, healthy bool)

	devices   map[string]nvml.Device
	lastBad   map[string]time.Time // set while unhealthy
	lastProbe time.Time
}

// run watches until ctx ends. Without an event set (NVML cannot make one)
// it probes only; it fails only when it cannot find the GPUs.
func (w *healthWatcher) run(ctx context.Context) error {
	set, ret := w.nvml.EventSetCreate()
	if err := nvmlError("create event set", ret); err != nil {
		logf.FromContext(ctx).Error(err, "GPU health from probes only")
		set = nil
	} else {
		defer set.Free()
	}
	if err := w.register(ctx, set); err != nil {
		return err
	}
	for ctx.Err() == nil {
		if set == nil {
			w.sleep(ctx)
		} else {
			ev, ret := set.Wait(uint32(w.wait.Milliseconds()))
			w.handle(ctx, ev, ret)
		}
		w.probe(ctx, false)
	}
	return nil
}

// sleep waits one event wait, or until ctx ends.
func (w *healthWatcher) sleep(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-w.clock.After(w.wait):
	}
}

// register finds the GPUs and asks NVML for their critical XIDs. A GPU that
// cannot report XIDs is still probed; one without a handle or a UUID cannot
// be, and discovery has marked it unhealthy.
func (w *healthWatcher) register(ctx context.Context, set nvml.EventSet) error {
	w.devices, w.lastBad = map[string]nvml.Device{}, map[string]time.Time{}
	n, ret := w.nvml.DeviceGetCount()
	if err := nvmlError("device count", ret); err != nil {
		return err
	}
	for i := range n {
		dev, uuid, err := w.find(i)
		if err != nil {
			logf.FromContext(ctx).Error(err, "GPU health not watched", "index", i)
			continue
		}
		w.devices[uuid] = dev
		if set == nil {
			continue
		}
		if err := registerXIDs(dev, set); err != nil {
			logf.FromContext(ctx).Error(err, "GPU health from probes only", "gpu", uuid)
		}
	}
	return nil
}

// find returns GPU i and its UUID.
func (w *healthWatcher) find(i int) (nvml.Device, string, error) {
	dev, ret := w.nvml.DeviceGetHandleByIndex(i)
	if err := nvmlError("device handle", ret); err != nil {
		return nil, "", fmt.Errorf("GPU %d: %w", i, err)
	}
	uuid, ret := dev.GetUUID()
	if err := nvmlError("uuid", ret); err != nil {
		return nil, "", fmt.Errorf("GPU %d: %w", i, err)
	}
	return dev, uuid, nil
}

func registerXIDs(dev nvml.Device, set nvml.EventSet) error {
	types, ret := dev.GetSupportedEventTypes()
	if err := nvmlError("supported events", ret); err != nil {
		return err
	}
	if types&nvml.EventTypeXidCriticalError == 0 {
		return errors.New("GPU does not report XIDs")
	}
	return nvmlError("register XID events", dev.RegisterEvents(nvml.EventTypeXidCriticalError, set))
}

// handle acts on what one event wait returned.
func (w *healthWatcher) handle(ctx context.Context, ev nvml.EventData, ret nvml.Return) {
	switch {
	case ret == nvml.ERROR_TIMEOUT:
	case ret == nvml.ERROR_GPU_IS_LOST:
		w.probe(ctx, true)
	case ret != nvml.SUCCESS:
		logf.FromContext(ctx).Error(nvmlError("wait for events", ret), "Watching GPU health")
		w.sleep(ctx) // do not spin on a broken event set
	case ev.EventType&nvml.EventTypeXidCriticalError != 0 && !applicationXID(ev.EventData):
		w.xid(ctx, ev)
	}
}

// xid marks the GPU of a critical XID unhealthy, or every GPU when NVML
// does not say which.
func (w *healthWatcher) xid(ctx context.Context, ev nvml.EventData) {
	reason := fmt.Sprintf("XID %d", ev.EventData)
	if ev.Device != nil {
		if uuid, ret := ev.Device.GetUUID(); ret == nvml.SUCCESS {
			w.bad(ctx, uuid, reason)
			return
		}
	}
	for uuid := range w.devices {
		w.bad(ctx, uuid, reason)
	}
}

// probe asks every GPU for its memory, at most every probeEvery unless
// forced: a lost GPU is unhealthy, a quiet one that answers recovers.
func (w *healthWatcher) probe(ctx context.Context, force bool) {
	now := w.clock.Now()
	if !force && now.Sub(w.lastProbe) < w.probeEvery {
		return
	}
	w.lastProbe = now
	for uuid, dev := range w.devices {
		_, ret := dev.GetMemoryInfo()
		since, unhealthy := w.lastBad[uuid]
		switch {
		case ret == nvml.ERROR_GPU_IS_LOST:
			w.bad(ctx, uuid, "lost")
		case ret == nvml.SUCCESS && unhealthy && now.Sub(since) >= w.recoverAfter:
			delete(w.lastBad, uuid)
			logf.FromContext(ctx).Info("GPU healthy again", "gpu", uuid)
			w.onChange(uuid, true)
		}
	}
}

// bad marks a GPU unhealthy, restarting its quiet period.
func (w *healthWatcher) bad(ctx context.Context, uuid, reason string) {
	_, already := w.lastBad[uuid]
	w.lastBad[uuid] = w.clock.Now()
	if !already {
		logf.FromContext(ctx).Info("GPU unhealthy", "gpu", uuid, "reason", reason)
		w.onChange(uuid, false)
	}
}
