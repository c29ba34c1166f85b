package agent

import (
	"fmt"
	"os"
	"path/filepath"

	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpuadmit/gpuadmit/pkg/agent/cdi"
)

// NodeSpecs makes the node's CDI spec; a cdi.Generator is one.
type NodeSpecs interface {
	// NodeSpec is the spec of the GPUs, a device per UUID; a GPU whose
	// edits could not be made is left out and named in the error.
	NodeSpec(uuids []string) (*cdispec.Spec, error)
	// Forget drops what was cached, so a rediscovery reads the driver again.
	Forget()
}

// SpecFile is the node's CDI spec in a CDI directory, "gpuadmit.io-gpu.json"
// (DRA mode's claim specs are "gpuadmit.io-gpu_<claim uid>.json").
func SpecFile(dir string) string {
	return filepath.Join(dir, "gpuadmit.io-gpu.json")
}

// writeSpec writes the node's CDI spec for the GPUs that serve shares, the
// devices Allocate names. A GPU whose edits could not be made is left out,
// so a container given it fails to start rather than start without it, and
// is named in the error; the others are written.
func (a *Agent) writeSpec(gpus []GPU) error {
	if a.opts.Specs == nil || a.opts.PublishOnly {
		return nil
	}
	a.opts.Specs.Forget()
	spec, err := a.opts.Specs.NodeSpec(specUUIDs(gpus))
	if spec == nil {
		return err
	}
	if err := os.MkdirAll(a.opts.CDIDir, 0o755); err != nil {
		return fmt.Errorf("CDI directory: %w", err)
	}
	if werr := cdi.WriteSpec(SpecFile(a.opts.CDIDir), spec); werr != nil {
		return werr
	}
	return err
}

// specUUIDs are the GPUs of the node's spec: those discovery read that may
// serve shares (MIG off).
func specUUIDs(gpus []GPU) []string {
	var out []string
	for _, g := range gpus {
		if g.Shares() && g.UUID != "" && g.Error == "" {
			out = append(out, g.UUID)
		}
	}
	return out
}
