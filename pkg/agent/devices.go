package agent

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// idSeparator joins a GPU's UUID and a device number in a device ID. NVML UUIDs
// ("GPU-5e1a…", "MIG-…") never hold two colons.
const idSeparator = "::"

// DeviceID is the ID of device (share) n of the GPU with uuid: "<uuid>::<n>".
func DeviceID(uuid string, n int) string {
	return uuid + idSeparator + strconv.Itoa(n)
}

// ParseDeviceID splits a device ID into its GPU's UUID and its device number.
func ParseDeviceID(id string) (uuid string, n int, err error) {
	uuid, num, ok := strings.Cut(id, idSeparator)
	if !ok || uuid == "" {
		return "", 0, fmt.Errorf("device %q is not <gpu-uuid>%s<n>", id, idSeparator)
	}
	n, err = strconv.Atoi(num)
	if err != nil || n < 0 || strconv.Itoa(n) != num { // one spelling per device: no "+5" or "05"
		return "", 0, fmt.Errorf("device %q has no device number after %q", id, idSeparator)
	}
	return uuid, n, nil
}

// shareGPU is one GPU as the device plugin serves it.
type shareGPU struct {
	uuid    string
	healthy bool
}

// snapshot is the plugin's immutable view of its GPUs. A new snapshot
// replaces it whole, and closing replaced tells every ListAndWatch stream to
// send the new list; readers (Allocate, GetPreferredAllocation) load the
// current one and never lock.
type snapshot struct {
	gpus     []shareGPU
	byUUID   map[string]int
	shares   int   // devices per GPU
	unitMiB  int64 // memory behind each device; 0 when no GPU's memory is known
	replaced chan struct{}
}

// newSnapshot serves shares devices on every GPU that serves shares and
// has a UUID to name them by, each device one share of unitMiB.
func newSnapshot(gpus []GPU, shares int) *snapshot {
	s := &snapshot{byUUID: map[string]int{}, shares: shares, unitMiB: shareUnitMiB(gpus, shares), replaced: make(chan struct{})}
	for _, g := range gpus {
		if !g.Shares() || g.UUID == "" {
			continue
		}
		s.byUUID[g.UUID] = len(s.gpus)
		s.gpus = append(s.gpus, shareGPU{uuid: g.UUID, healthy: g.Healthy})
	}
	return s
}

// shareOffer is the share the plugin serves on a node with gpus, and false
// where it serves none: no GPU serves shares (MIG is on everywhere), or the
// memory of none of them is known.
func shareOffer(gpus []GPU, resource string, shares int64) (allocator.ShareOffer, bool) {
	s := newSnapshot(gpus, int(shares))
	if len(s.gpus) == 0 || s.unitMiB == 0 {
		return allocator.ShareOffer{}, false
	}
	return allocator.ShareOffer{Resource: resource, UnitMiB: s.unitMiB, SharesPerGPU: shares}, true
}

// shareUnitMiB is the memory behind one device: the smallest memory among
// the GPUs that serve shares, divided by shares, so that every device on the
// node is the same share and every GPU holds shares of them. A GPU whose
// memory discovery could not read does not count. Zero when none is known.
func shareUnitMiB(gpus []GPU, shares int) int64 {
	var smallest int64
	for _, g := range gpus {
		if g.Shares() && g.MemoryMiB > 0 && (smallest == 0 || g.MemoryMiB < smallest) {
			smallest = g.MemoryMiB
		}
	}
	return smallest / int64(max(shares, 1))
}

// gpu returns the GPU a device ID names, or an error when the plugin
// advertises no such device.
func (s *snapshot) gpu(id string) (shareGPU, int, error) {
	uuid, n, err := ParseDeviceID(id)
	if err != nil {
		return shareGPU{}, 0, err
	}
	i, ok := s.byUUID[uuid]
	if !ok {
		return shareGPU{}, 0, fmt.Errorf("device %q: GPU %s is not served here", id, uuid)
	}
	if n >= s.shares {
		return shareGPU{}, 0, fmt.Errorf("device %q: GPU %s has %d devices", id, uuid, s.shares)
	}
	return s.gpus[i], i, nil
}

// devices is the list ListAndWatch sends.
func (s *snapshot) devices() []*pluginapi.Device {
	var out []*pluginapi.Device
	for _, g := range s.gpus {
		health := pluginapi.Healthy
		if !g.healthy {
			health = pluginapi.Unhealthy
		}
		for n := range s.shares {
			out = append(out, &pluginapi.Device{ID: DeviceID(g.uuid, n), Health: health})
		}
	}
	return out
}

// table holds the current snapshot. Only writers (discovery, health) take
// its mutex, to replace the snapshot and close the old one's channel once.
type table struct {
	mu      sync.Mutex
	current atomic.Pointer[snapshot]
	shares  int
}

func newTable(shares int) *table {
	t := &table{shares: shares}
	t.current.Store(newSnapshot(nil, shares))
	return t
}

func (t *table) load() *snapshot { return t.current.Load() }

// set replaces the snapshot with one built from gpus, unless that would
// serve the same devices, so a resync does not make every stream resend.
func (t *table) set(gpus []GPU) {
	t.mu.Lock()
	defer t.mu.Unlock()
	next, current := newSnapshot(gpus, t.shares), t.current.Load()
	if slices.Equal(next.gpus, current.gpus) && next.unitMiB == current.unitMiB {
		return
	}
	close(t.current.Swap(next).replaced)
}
