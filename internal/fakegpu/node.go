package fakegpu

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// Config is a node's fake GPUs, as a JSON file Load reads.
type Config struct {
	// Readings is the directory of the NVML readings the GPUs answer as
	// (pkg/allocator/testdata/nvml's files); a relative path is relative to
	// the configuration file's directory. Required.
	Readings string `json:"readings"`
	// GPUs are the node's GPUs in index order: GPU i has minor number i, so
	// its device node is /dev/nvidia<i>. At least one.
	GPUs []GPUConfig `json:"gpus"`
	// Control is the control file (Control) the agent re-reads while it
	// runs; a relative path is relative to the configuration file's
	// directory. Empty means none: the GPUs never change.
	Control string `json:"control,omitempty"`
	// ProcDriver is a directory that stands for the driver's /proc/driver
	// (WriteProcDriver's), where nvcdi reads the MIG capabilities' minors;
	// a relative path is relative to the configuration file's directory.
	// The agent of the real-node tests mounts it over its container's
	// /proc/driver (MountProcDriver). Empty means none: nvcdi makes no
	// MIG device's edits.
	ProcDriver string `json:"procDriver,omitempty"`
}

// GPUConfig is one fake GPU.
type GPUConfig struct {
	// Reading is the file in Readings the GPU answers as
	// ("h100-80gb-hbm3-raw.txt"). Required.
	Reading string `json:"reading"`
	// UUID is the GPU's UUID; empty means UUID(index).
	UUID string `json:"uuid,omitempty"`
	// MIG puts the GPU in MIG mode with a GPU instance of each profile
	// named ("3g.40gb", NVML's name without "MIG "), IDs 1, 2, … in order,
	// each at the first placement of its profile free of the instances
	// before it; their MIG devices' UUIDs are MIGUUID(index, ID). Empty
	// leaves the MIG mode the reading's (off in both readings).
	MIG []string `json:"mig,omitempty"`
}

// Control is what a test changes while the agent runs, written as JSON to
// the configuration's control file (atomically: write and rename).
type Control struct {
	// Lost are the UUIDs of the GPUs that have fallen off the bus: their
	// queries answer ERROR_GPU_IS_LOST, and the health event set reports a
	// critical XID 79 ("GPU has fallen off the bus") for each when it
	// joins the list. A GPU that leaves the list answers again.
	Lost []string `json:"lost"`
	// Failed are the UUIDs of GPUs that had a critical error but still
	// answer: the health event set reports a critical XID 48 (a
	// double-bit ECC error) for each when it joins the list.
	Failed []string `json:"failed,omitempty"`
	// GoneInstances are GPU instances deleted from GPUs in MIG mode, by
	// GPU UUID: NVML lists them no more, nor their MIG devices.
	GoneInstances map[string][]uint32 `json:"goneInstances,omitempty"`
}

// XIDs the fake NVML's event set reports.
const (
	// XidFallenOffTheBus is the XID NVML reports for a GPU that is lost.
	XidFallenOffTheBus = 79
	// XidDoubleBitECC is a critical XID of a GPU that still answers.
	XidDoubleBitECC = 48
)

// Node is the NVML of a node of fake GPUs: go-nvml's mock taught every
// call the agent's discovery and health watching, nvcdi and go-nvlib make.
type Node struct {
	mock.Interface
	// Devices are the GPUs in index order.
	Devices []*Device
	// ProcDriver is the configuration's ProcDriver, resolved; empty if none.
	ProcDriver string

	control string
	// poll is how long an event wait that finds nothing new sleeps at most
	// before it reads the control file again.
	poll time.Duration

	mu       sync.Mutex
	reported map[string]uint64 // the XID the event set last reported of each GPU in Lost or Failed
}

// Load reads a node's configuration from path and builds its NVML.
func Load(path string) (*Node, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("fake NVML configuration: %w", err)
	}
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("fake NVML configuration %s: %w", path, err)
	}
	return New(c, filepath.Dir(path))
}

// New builds the NVML of the configured GPUs; relative paths in c are
// relative to dir.
func New(c Config, dir string) (*Node, error) {
	if c.Readings == "" || len(c.GPUs) == 0 {
		return nil, errors.New("fake NVML configuration: readings and at least one GPU are required")
	}
	n := &Node{poll: 500 * time.Millisecond, reported: map[string]uint64{}}
	if c.Control != "" {
		n.control = relative(dir, c.Control)
	}
	if c.ProcDriver != "" {
		n.ProcDriver = relative(dir, c.ProcDriver)
	}
	readings := map[string]Reading{}
	for i, g := range c.GPUs {
		r, ok := readings[g.Reading]
		if !ok {
			var err error
			if r, err = ReadReading(filepath.Join(relative(dir, c.Readings), g.Reading)); err != nil {
				return nil, fmt.Errorf("fake NVML configuration: gpus[%d].reading: %w", i, err)
			}
			readings[g.Reading] = r
		}
		uuid := g.UUID
		if uuid == "" {
			uuid = UUID(i)
		}
		d := r.Device(uuid)
		if len(g.MIG) > 0 {
			if err := d.enableMIG(i, g.MIG); err != nil {
				return nil, fmt.Errorf("fake NVML configuration: gpus[%d].mig: %w", i, err)
			}
		}
		n.Devices = append(n.Devices, d)
	}
	n.teach()
	return n, nil
}

func relative(dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

func (n *Node) teach() {
	// Discovery starts by counting: the control file's changes apply
	// there too, not only when the health watcher waits for events.
	n.DeviceGetCountFunc = func() (int, nvml.Return) {
		n.refresh()
		return len(n.Devices), nvml.SUCCESS
	}
	n.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i < 0 || i >= len(n.Devices) {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		return n.Devices[i], nvml.SUCCESS
	}
	n.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mock.EventSet{WaitFunc: n.wait, FreeFunc: func() nvml.Return { return nvml.SUCCESS }}, nvml.SUCCESS
	}
	gpus := make([]*mock.Device, len(n.Devices))
	for i, d := range n.Devices {
		gpus[i] = d.Device
	}
	Teach(&n.Interface, gpus...)
	// DeviceGetHandleByUUID must hand out the Device, not its mock, so
	// that ProfileName knows its reading; a MIG device's UUID (nvcdi asks
	// by it) gives its handle while its instance lives.
	n.DeviceGetHandleByUUIDFunc = func(uuid string) (nvml.Device, nvml.Return) {
		for _, d := range n.Devices {
			if d.UUID == uuid {
				return d, nvml.SUCCESS
			}
			if mig, ok := d.migByUUID(uuid); ok {
				return mig, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
}

// wait is the health event set's Wait: it applies the control file, and
// reports a critical XID for a GPU newly lost; with nothing to report it
// returns ERROR_TIMEOUT after the timeout (at most the poll interval, so
// that changes are seen soon), as NVML's blocking wait does.
func (n *Node) wait(timeoutMs uint32) (nvml.EventData, nvml.Return) {
	if ev, ok := n.apply(); ok {
		return ev, nvml.SUCCESS
	}
	time.Sleep(min(time.Duration(timeoutMs)*time.Millisecond, n.poll))
	if ev, ok := n.apply(); ok {
		return ev, nvml.SUCCESS
	}
	return nvml.EventData{}, nvml.ERROR_TIMEOUT
}

// apply applies the control file (refresh) and returns the XID event of
// one GPU that is lost or failed and was not reported so yet.
func (n *Node) apply() (nvml.EventData, bool) {
	c, ok := n.refresh()
	if !ok {
		return nvml.EventData{}, false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, d := range n.Devices {
		var xid uint64
		switch {
		case slices.Contains(c.Lost, d.UUID):
			xid = XidFallenOffTheBus
		case slices.Contains(c.Failed, d.UUID):
			xid = XidDoubleBitECC
		default:
			delete(n.reported, d.UUID)
			continue
		}
		if n.reported[d.UUID] != xid {
			n.reported[d.UUID] = xid
			return nvml.EventData{Device: d, EventType: nvml.EventTypeXidCriticalError, EventData: xid}, true
		}
	}
	return nvml.EventData{}, false
}

// refresh reads the control file and sets each GPU lost or not and its
// gone GPU instances. A control file that is missing or unreadable
// changes nothing (ok false).
func (n *Node) refresh() (c Control, ok bool) {
	if n.control == "" {
		return c, false
	}
	b, err := os.ReadFile(n.control)
	if err != nil || json.Unmarshal(b, &c) != nil {
		return c, false
	}
	for _, d := range n.Devices {
		d.mig.setGone(c.GoneInstances[d.UUID])
		d.Lost.Store(slices.Contains(c.Lost, d.UUID))
	}
	return c, true
}

// WriteControl writes c to path atomically, as a test changes a running node.
func WriteControl(path string, c Control) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
