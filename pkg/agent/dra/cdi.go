package dra

import (
	"encoding/json"
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
)

// CDIKind is the vendor/class of gpuadmit's CDI devices, whose IDs are
// "gpuadmit.io/gpu=<claim uid>-<request>-<device>".
const CDIKind = "gpuadmit.io/gpu"

// cdiName is a device's CDI name within a claim: unique per claim UID (the
// runtime may cache specs, so a name is never reused), request and device.
func cdiName(claim types.UID, request, device string) string {
	return fmt.Sprintf("%s-%s-%s", claim, strings.ReplaceAll(request, "/", "-"), device)
}

// cdiID is the fully qualified CDI device ID the kubelet passes on.
func cdiID(name string) string { return CDIKind + "=" + name }

// cdiEdits is what a container gets for one device: the GPU (or MIG
// device) made visible by the NVIDIA container runtime, and its memory
// limit, advisory (see the package documentation).
func cdiEdits(visible string, limitMiB int64) cdispec.ContainerEdits {
	return cdispec.ContainerEdits{Env: []string{
		agent.EnvVisibleDevices + "=" + visible,
		agent.EnvMemoryLimitMiB + "=" + strconv.FormatInt(limitMiB, 10),
	}}
}

// cdiDevice is the CDI device named name that gives a container dev with
// limitMiB of its memory.
func cdiDevice(name string, dev device, limitMiB int64) cdispec.Device {
	return cdispec.Device{Name: name, ContainerEdits: cdiEdits(dev.visible, limitMiB)}
}

// cdiPath is the claim's spec file: "gpuadmit.io-gpu_<claim uid>.json".
func cdiPath(dir string, claim types.UID) string {
	return filepath.Join(dir, strings.ReplaceAll(CDIKind, "/", "-")+"_"+string(claim)+".json")
}

// writeCDI writes a claim's spec file, of the oldest CDI version that
// holds it (0.3.0 for environment edits), which every CDI-aware runtime reads.
func writeCDI(dir string, claim types.UID, devs []cdispec.Device) error {
	spec := &cdispec.Spec{Kind: CDIKind, Devices: devs}
	version, err := cdispec.MinimumRequiredVersion(spec)
	if err != nil {
		return fmt.Errorf("CDI spec of claim %s: %w", claim, err)
	}
	spec.Version = version
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return fmt.Errorf("encode CDI spec of claim %s: %w", claim, err)
	}
	return writeAtomic(cdiPath(dir, claim), b)
}

// removeCDI removes a claim's spec file; a missing one is fine.
func removeCDI(dir string, claim types.UID) error {
	if err := os.Remove(cdiPath(dir, claim)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove CDI spec of claim %s: %w", claim, err)
	}
	return nil
}
