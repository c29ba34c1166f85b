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
// devices Allocate names. A GPU whose edits could not be made is left out
// of it and marked in gpus as not read (withoutDevice), so its devices serve
// unhealthy and the kubelet never hands it out, while the others serve; only
// a spec that cannot be made at all (no control node, no driver libraries)
// is an error.
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
	withoutDevice(gpus, spec, err)
	return nil
}

// withoutDevice marks the GPUs the spec has no device for as not read, with
// why (the generator's error), so they serve as unhealthy while the others
// serve: a GPU whose device node is missing would otherwise be handed out
// as a CDI device no runtime can inject.
func withoutDevice(gpus []GPU, spec *cdispec.Spec, why error) {
	have := map[string]bool{}
	for _, d := range spec.Devices {
		have[d.Name] = true
	}
	for i, g := range gpus {
		if g.Shares() && g.UUID != "" && g.Error == "" && !have[g.UUID] {
			gpus[i].Error = fmt.Sprintf("no CDI device: %v", why)
		}
	}
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
