package agent

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// idSeparator joins a GPU's UUID and a unit number in a device ID. NVML UUIDs
// ("GPU-5e1a…", "MIG-…") never hold two colons.
const idSeparator = "::"

// DeviceID is the ID of unit n of the GPU with uuid: "<uuid>::<n>".
func DeviceID(uuid string, n int) string {
	return uuid + idSeparator + strconv.Itoa(n)
}

// ParseDeviceID splits a device ID into its GPU's UUID and its unit number.
func ParseDeviceID(id string) (uuid string, n int, err error) {
	uuid, num, ok := strings.Cut(id, idSeparator)
	if !ok || uuid == "" {
		return "", 0, fmt.Errorf("device %q is not <gpu-uuid>%s<n>", id, idSeparator)
	}
	n, err = strconv.Atoi(num)
	if err != nil || n < 0 || strconv.Itoa(n) != num { // one spelling per device: no "+5" or "05"
		return "", 0, fmt.Errorf("device %q has no unit number after %q", id, idSeparator)
	}
	return uuid, n, nil
}

// shareGPU is one GPU as the device plugin serves it.
type shareGPU struct {
	uuid    string
	units   int
	healthy bool
}

// snapshot is the plugin's immutable view of its GPUs. A new snapshot
// replaces it whole, and closing replaced tells every ListAndWatch stream to
// send the new list; readers (Allocate, GetPreferredAllocation) load the
// current one and never lock.
type snapshot struct {
	gpus     []shareGPU
	byUUID   map[string]int
	replaced chan struct{}
}

func newSnapshot(gpus []GPU, unitMiB int64) *snapshot {
	s := &snapshot{byUUID: map[string]int{}, replaced: make(chan struct{})}
	for _, g := range gpus {
		if !g.Shares() {
			continue
		}
		s.byUUID[g.UUID] = len(s.gpus)
		s.gpus = append(s.gpus, shareGPU{uuid: g.UUID, units: int(g.MemoryMiB / unitMiB), healthy: g.Healthy})
	}
	return s
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
	if n >= s.gpus[i].units {
		return shareGPU{}, 0, fmt.Errorf("device %q: GPU %s has %d units", id, uuid, s.gpus[i].units)
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
		for n := range g.units {
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
	unitMiB int64
}

func newTable(unitMiB int64) *table {
	t := &table{unitMiB: unitMiB}
	t.current.Store(newSnapshot(nil, unitMiB))
	return t
}

func (t *table) load() *snapshot { return t.current.Load() }

// set replaces the snapshot with one built from gpus, unless that would
// serve the same devices, so a resync does not make every stream resend.
func (t *table) set(gpus []GPU) {
	t.mu.Lock()
	defer t.mu.Unlock()
	next := newSnapshot(gpus, t.unitMiB)
	if slices.Equal(next.gpus, t.current.Load().gpus) {
		return
	}
	close(t.current.Swap(next).replaced)
}
