package dra

import (
	"fmt"
	"maps"
	"os"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// prepare prepares one claim: the checkpointed answer when it was prepared
// before, its CDI spec written again, else a CDI device per allocated device
// of this driver, checked against what is already prepared on each device.
// d.mu is held.
func (d *Driver) prepare(c *resourceapi.ResourceClaim) ([]kubeletplugin.Device, error) {
	if done, ok := d.state.Claims[c.UID]; ok {
		if err := d.rewriteCDI(c.UID, done); err != nil {
			return nil, fmt.Errorf("claim %s/%s: %w", c.Namespace, c.Name, err)
		}
		return done.result(), nil
	}
	pc, specs, err := d.plan(c)
	if err != nil {
		return nil, fmt.Errorf("claim %s/%s: %w", c.Namespace, c.Name, err)
	}
	if err := d.writeCDI(c.UID, specs); err != nil {
		return nil, err
	}
	next := d.state.clone()
	next.Claims[c.UID] = pc
	if err := next.save(d.opts.DataDir); err != nil {
		_ = removeCDI(d.opts.CDIDir, c.UID)
		return nil, fmt.Errorf("claim %s/%s: %w", c.Namespace, c.Name, err)
	}
	d.state = next
	return pc.result(), nil
}

// plan decides what a claim gets on each of its devices and the CDI
// devices that carry it, refusing what would over-commit a device.
func (d *Driver) plan(c *resourceapi.ResourceClaim) (preparedClaim, []cdispec.Device, error) {
	pc := preparedClaim{Namespace: c.Namespace, Name: c.Name}
	if c.Status.Allocation == nil {
		return pc, nil, fmt.Errorf("not allocated")
	}
	used := d.state.usage()
	var specs []cdispec.Device
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Driver != DriverName {
			continue
		}
		if class := requestClass(c, r.Request); !IsClass(class) {
			return pc, nil, fmt.Errorf("device %s was allocated through DeviceClass %q, which is not gpuadmit's: gpuadmit prepares its devices only for claims through its own classes (names ending %s), which its admission policy guards; ask through one of those",
				r.Device, class, allocator.DRAClassSuffix)
		}
		dev, ok := d.devices[r.Device]
		if !ok {
			return pc, nil, fmt.Errorf("device %s is not published on this node (gone or unhealthy)", r.Device)
		}
		if key := dev.gone(); key != "" {
			return pc, nil, fmt.Errorf("device %s is tainted %s: the pod is to be evicted", r.Device, key)
		}
		if dev.visible == "" {
			return pc, nil, fmt.Errorf("device %s: its MIG device UUID is unknown, so the container runtime could not be told which it is", r.Device)
		}
		pd := d.take(c, r, dev)
		if err := fits(dev, used[r.Device], pd); err != nil {
			return pc, nil, fmt.Errorf("device %s: %w", r.Device, err)
		}
		used[r.Device] = used[r.Device].add(pd)
		pd.CDIDeviceID = cdiID(cdiName(c.UID, r.Request, r.Device))
		spec, err := d.cdiDevice(pd, dev)
		if err != nil {
			return pc, nil, err
		}
		pc.Devices = append(pc.Devices, pd)
		specs = append(specs, spec)
	}
	return pc, specs, nil
}

// rewriteCDI writes a prepared claim's CDI spec again from its checkpoint
// entry. The kubelet prepares again what it prepared before a restart, and
// after a reboot the spec is gone (the CDI directory is a tmpfs) while the
// checkpoint is not: answering from the checkpoint alone would hand the
// runtime CDI IDs with nothing behind them. The spec is written from the
// devices as discovered now, so device nodes and an upgraded agent's edits
// are current. A device that is not published now fails the claim, unless
// its spec is still there (the agent restarted and has not discovered yet),
// and so does one that is now another GPU than the one the claim was given.
func (d *Driver) rewriteCDI(uid types.UID, pc preparedClaim) error {
	specs := make([]cdispec.Device, 0, len(pc.Devices))
	for _, pd := range pc.Devices {
		dev, ok := d.devices[pd.Device]
		if key := dev.gone(); ok && key != "" {
			return fmt.Errorf("device %s it was prepared on is tainted %s: the pod is to be evicted", pd.Device, key)
		}
		if !ok {
			if _, err := os.Stat(cdiPath(d.opts.CDIDir, uid)); err == nil {
				return nil
			}
			return fmt.Errorf("device %s it was prepared on is not published on this node now (gone or unhealthy), so its CDI spec cannot be written again", pd.Device)
		}
		if pd.UUID != "" && dev.visible != pd.UUID {
			return fmt.Errorf("device %s is now %s, not the %s the claim was prepared on", pd.Device, dev.visible, pd.UUID)
		}
		spec, err := d.cdiDevice(pd, dev)
		if err != nil {
			return err
		}
		specs = append(specs, spec)
	}
	return d.writeCDI(uid, specs)
}

// take is what the claim's result holds of dev: the consumed memory of a
// share, or the whole device when the claim asked for no memory (a whole
// GPU), the device is not shared (MIG) or the allocation says nothing.
func (d *Driver) take(c *resourceapi.ResourceClaim, r resourceapi.DeviceRequestAllocationResult, dev device) preparedDevice {
	pd := preparedDevice{Request: r.Request, Pool: r.Pool, Device: r.Device, UUID: dev.visible, ShareID: r.ShareID, MemoryMiB: dev.memoryMiB, Exclusive: true}
	consumed, ok := r.ConsumedCapacity[CapacityMemory]
	if dev.shared && ok && asksMemory(c, r.Request) {
		pd.MemoryMiB, pd.Exclusive = (consumed.Value()+1<<20-1)>>20, false
	}
	return pd
}

// fits refuses a claim that would take more memory than the device has
// left, any claim beside an exclusive one, and an exclusive claim beside
// any other.
func fits(dev device, u usage, pd preparedDevice) error {
	switch {
	case u.exclusive:
		return fmt.Errorf("already prepared for another claim that has the whole device")
	case pd.Exclusive && u.claims > 0:
		return fmt.Errorf("the claim wants the whole device but %d other claims are prepared on it", u.claims)
	case u.mib+pd.MemoryMiB > dev.memoryMiB:
		return fmt.Errorf("the claim consumes %d MiB but other claims already hold %d of its %d MiB: that would over-commit the GPU",
			pd.MemoryMiB, u.mib, dev.memoryMiB)
	}
	return nil
}

// asksMemory reports whether the claim's request (or subrequest, "a/b")
// asked for memory capacity; without it the allocation took the default,
// the whole device.
func asksMemory(c *resourceapi.ResourceClaim, request string) bool {
	_, capacity := lookupRequest(c, request)
	return hasMemory(capacity)
}

// requestClass is the DeviceClass the claim's request (or subrequest,
// "a/b") names, "" when the claim has no such request.
func requestClass(c *resourceapi.ResourceClaim, request string) string {
	class, _ := lookupRequest(c, request)
	return class
}

// lookupRequest finds the request (or subrequest, "a/b") an allocation
// result names: its DeviceClass and its capacity requirements.
func lookupRequest(c *resourceapi.ResourceClaim, request string) (string, *resourceapi.CapacityRequirements) {
	base, sub, _ := strings.Cut(request, "/")
	for _, r := range c.Spec.Devices.Requests {
		if r.Name != base {
			continue
		}
		if sub == "" {
			if r.Exactly == nil {
				return "", nil
			}
			return r.Exactly.DeviceClassName, r.Exactly.Capacity
		}
		for _, s := range r.FirstAvailable {
			if s.Name == sub {
				return s.DeviceClassName, s.Capacity
			}
		}
	}
	return "", nil
}

func hasMemory(c *resourceapi.CapacityRequirements) bool {
	if c == nil {
		return false
	}
	_, ok := c.Requests[CapacityMemory]
	return ok
}

// result is the kubelet's answer for a prepared claim.
func (pc preparedClaim) result() []kubeletplugin.Device {
	out := make([]kubeletplugin.Device, 0, len(pc.Devices))
	for _, d := range pc.Devices {
		out = append(out, kubeletplugin.Device{
			Requests: []string{d.Request}, PoolName: d.Pool, DeviceName: d.Device,
			CDIDeviceIDs: []string{d.CDIDeviceID}, ShareID: d.ShareID,
		})
	}
	return out
}

// clone copies the claim map, so a failed save leaves the state as it was.
func (cp checkpoint) clone() checkpoint {
	return checkpoint{Version: cp.Version, Claims: maps.Clone(cp.Claims)}
}
