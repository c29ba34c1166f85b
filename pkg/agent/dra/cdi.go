package dra

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpuadmit/gpuadmit/pkg/agent"
	"github.com/gpuadmit/gpuadmit/pkg/agent/cdi"
)

// CDIKind is the vendor/class of gpuadmit's CDI devices, whose IDs are
// "gpuadmit.io/gpu=<claim uid>-<request>-<device>".
const CDIKind = cdi.Kind

// Edits are the CDI edits of the node's GPUs, what the driver needs of a
// cdi.Generator.
type Edits interface {
	// CommonEdits are what every GPU container needs: control device
	// nodes, driver libraries, hooks.
	CommonEdits() (cdispec.ContainerEdits, error)
	// DeviceEdits are one GPU's or MIG device's own, by its UUID.
	DeviceEdits(uuid string) (cdispec.ContainerEdits, error)
	// Forget drops what was cached, after a rediscovery.
	Forget()
}

// cdiName is a device's CDI name within a claim: unique per claim UID (the
// runtime may cache specs, so a name is never reused), request and device.
func cdiName(claim types.UID, request, device string) string {
	return fmt.Sprintf("%s-%s-%s", claim, strings.ReplaceAll(request, "/", "-"), device)
}

// cdiID is the fully qualified CDI device ID the kubelet passes on.
func cdiID(name string) string { return CDIKind + "=" + name }

// cdiDevice is the CDI device of one prepared device, named by its
// checkpointed CDI ID: the GPU's (or MIG device's) own device nodes and
// hooks, and its memory limit, advisory (see the package documentation).
// It depends only on pd and the published dev, so a claim's spec can be
// made again from its checkpoint entry.
func (d *Driver) cdiDevice(pd preparedDevice, dev device) (cdispec.Device, error) {
	if d.opts.CDI == nil {
		return cdispec.Device{}, fmt.Errorf("device %s: the driver has no CDI generator", pd.Device)
	}
	e, err := d.opts.CDI.DeviceEdits(dev.visible)
	if err != nil {
		return cdispec.Device{}, fmt.Errorf("device %s: %w", pd.Device, err)
	}
	e.Env = append(e.Env, agent.EnvMemoryLimitMiB+"="+strconv.FormatInt(pd.MemoryMiB, 10))
	return cdispec.Device{Name: strings.TrimPrefix(pd.CDIDeviceID, CDIKind+"="), ContainerEdits: e}, nil
}

// cdiPath is the claim's spec file: "gpuadmit.io-gpu_<claim uid>.json".
func cdiPath(dir string, claim types.UID) string {
	return filepath.Join(dir, strings.ReplaceAll(CDIKind, "/", "-")+"_"+string(claim)+".json")
}

// writeCDI writes a claim's spec file: its devices, and what every GPU
// needs as the spec's own edits, which a runtime applies once however many
// of the claim's devices a container gets, NVIDIA_VISIBLE_DEVICES=void
// among them so that a legacy NVIDIA runtime adds nothing.
func (d *Driver) writeCDI(claim types.UID, devs []cdispec.Device) error {
	common, err := d.opts.CDI.CommonEdits()
	if err != nil {
		return fmt.Errorf("CDI spec of claim %s: %w", claim, err)
	}
	spec := &cdispec.Spec{Kind: CDIKind, ContainerEdits: common, Devices: devs}
	return cdi.WriteSpec(cdiPath(d.opts.CDIDir, claim), spec)
}

// removeCDI removes a claim's spec file; a missing one is fine.
func removeCDI(dir string, claim types.UID) error {
	if err := os.Remove(cdiPath(dir, claim)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove CDI spec of claim %s: %w", claim, err)
	}
	return nil
}
