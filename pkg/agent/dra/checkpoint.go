package dra

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuadmit/gpuadmit/pkg/agent/cdi"
)

// checkpointFile is the file in the plugin data directory that records the
// prepared claims, so that preparing a claim again after an agent restart
// returns the same answer and the memory already given out still counts.
const checkpointFile = "checkpoint.json"

// checkpointVersion is the checkpoint format; a file of another version is
// refused rather than misread.
const checkpointVersion = 1

// checkpoint is the prepared claims by UID.
type checkpoint struct {
	Version int                         `json:"version"`
	Claims  map[types.UID]preparedClaim `json:"claims"`
}

// preparedClaim is what Prepare did for one claim.
type preparedClaim struct {
	Namespace string           `json:"namespace"`
	Name      string           `json:"name"`
	Devices   []preparedDevice `json:"devices"`
}

// preparedDevice is one allocated device of a prepared claim.
type preparedDevice struct {
	// Request is the allocation result's request ("gpu", or "gpu/small").
	Request string `json:"request"`
	// Pool and Device name the device.
	Pool   string `json:"pool"`
	Device string `json:"device"`
	// UUID is the GPU's (or MIG device's) UUID the device was when the
	// claim was prepared; empty in checkpoints of agents before it was kept.
	UUID string `json:"uuid,omitempty"`
	// ShareID is the allocation's share of a shared device.
	ShareID *types.UID `json:"shareID,omitempty"`
	// MemoryMiB is what the claim counts against the device.
	MemoryMiB int64 `json:"memoryMiB"`
	// Exclusive is set when no other claim may use the device with it.
	Exclusive bool `json:"exclusive,omitempty"`
	// CDIDeviceID is the CDI device the container runtime gets.
	CDIDeviceID string `json:"cdiDeviceID"`
}

// loadCheckpoint reads the checkpoint in dir; a missing file is an empty one.
func loadCheckpoint(dir string) (checkpoint, error) {
	cp := checkpoint{Version: checkpointVersion, Claims: map[types.UID]preparedClaim{}}
	b, err := os.ReadFile(filepath.Join(dir, checkpointFile))
	if errors.Is(err, fs.ErrNotExist) {
		return cp, nil
	}
	if err != nil {
		return cp, fmt.Errorf("read checkpoint: %w", err)
	}
	if err := json.Unmarshal(b, &cp); err != nil {
		return cp, fmt.Errorf("decode checkpoint %s: %w", filepath.Join(dir, checkpointFile), err)
	}
	if cp.Version != checkpointVersion {
		return cp, fmt.Errorf("checkpoint %s has version %d, this agent reads %d", filepath.Join(dir, checkpointFile), cp.Version, checkpointVersion)
	}
	if cp.Claims == nil {
		cp.Claims = map[types.UID]preparedClaim{}
	}
	return cp, nil
}

// save writes the checkpoint atomically: a reader (the next agent) sees the
// old file or the new one, never half of one.
func (cp checkpoint) save(dir string) error {
	b, err := json.MarshalIndent(cp, "", "  ")
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	return cdi.WriteAtomic(filepath.Join(dir, checkpointFile), b)
}

// usage is what the prepared claims hold of each device.
type usage struct {
	mib       int64
	claims    int
	exclusive bool
	uuid      string // the GPU it was when prepared; empty where not recorded
}

// usage sums the prepared claims by device name.
func (cp checkpoint) usage() map[string]usage {
	out := map[string]usage{}
	for _, c := range cp.Claims {
		for _, d := range c.Devices {
			out[d.Device] = out[d.Device].add(d)
		}
	}
	return out
}

func (u usage) add(d preparedDevice) usage {
	out := usage{mib: u.mib + d.MemoryMiB, claims: u.claims + 1, exclusive: u.exclusive || d.Exclusive, uuid: u.uuid}
	if d.UUID != "" {
		out.uuid = d.UUID
	}
	return out
}
