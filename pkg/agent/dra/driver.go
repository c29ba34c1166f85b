package dra

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// Default directories of a DRA driver on a node.
const (
	// DefaultPluginDataDir holds the driver's gRPC socket and checkpoint.
	DefaultPluginDataDir = kubeletplugin.KubeletPluginsDir + "/" + DriverName
	// DefaultRegistrarDir is where the kubelet looks for plugins to register.
	DefaultRegistrarDir = kubeletplugin.KubeletRegistryDir
	// DefaultCDIDir is where container runtimes read CDI specs.
	DefaultCDIDir = "/var/run/cdi"
)

// DriverOptions configure a Driver; the zero value uses the default
// directories, which only a node has, and prepares no claim.
type DriverOptions struct {
	// CDI makes the CDI edits of the node's GPUs; Run sets a
	// cdi.Generator. Nil refuses every claim: for a driver that only
	// publishes.
	CDI Edits
	// DataDir holds the checkpoint (and, under kubeletplugin.Start, the
	// DRA socket); empty means /var/lib/kubelet/plugins/gpu.gpuadmit.io.
	DataDir string
	// CDIDir receives one CDI spec per prepared claim; empty means /var/run/cdi.
	CDIDir string
	// Devices shape the published devices.
	Devices DeviceOptions
}

func (o *DriverOptions) defaults() {
	if o.DataDir == "" {
		o.DataDir = DefaultPluginDataDir
	}
	if o.CDIDir == "" {
		o.CDIDir = DefaultCDIDir
	}
}

// Driver is the DRA plugin the kubelet calls: it prepares allocated claims
// of gpu.gpuadmit.io devices as CDI devices, never giving a device more
// memory than it has, and remembers them in a checkpoint.
type Driver struct {
	opts DriverOptions

	mu      sync.Mutex
	devices map[string]device // the published devices by name
	state   checkpoint
}

var _ kubeletplugin.DRAPlugin = (*Driver)(nil)

// NewDriver returns a driver that knows the claims prepared before (the
// checkpoint in DataDir) and no devices yet (SetGPUs).
func NewDriver(o DriverOptions) (*Driver, error) {
	o.defaults()
	for _, dir := range []string{o.DataDir, o.CDIDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", dir, err)
		}
	}
	cp, err := loadCheckpoint(o.DataDir)
	if err != nil {
		return nil, err
	}
	return &Driver{opts: o, devices: map[string]device{}, state: cp}, nil
}

// SetGPUs takes a discovery and the MIG device UUIDs (nil keeps those of
// the options) and returns the devices to publish: the GPUs' devices, and
// for every device that prepared claims hold but that is gone, a device
// tainted TaintGone, so that their pods are evicted rather than left on
// nothing. The CDI edits are made anew from here on: a GPU's minor number
// may have changed with its MIG mode.
func (d *Driver) SetGPUs(gpus []allocator.NodeGPU, migUUIDs map[InstanceKey]string) []resourceapi.Device {
	if d.opts.CDI != nil {
		d.opts.CDI.Forget()
	}
	o := d.opts.Devices
	if migUUIDs != nil {
		o.MIGUUIDs = migUUIDs
	}
	devs := devices(gpus, o)
	byName := make(map[string]device, len(devs))
	for _, dev := range devs {
		byName[dev.api.Name] = dev
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, held := range d.state.usage() {
		dev, ok := byName[name]
		switch {
		case !ok:
			dev = goneDevice(name, held.mib)
			devs = append(devs, dev)
		case held.uuid != "" && held.uuid != dev.visible:
			// The name is now another GPU: the claims on it lost theirs.
			dev.taint(TaintGone, resourceapi.DeviceTaintEffectNoExecute)
			devs[slices.IndexFunc(devs, func(x device) bool { return x.api.Name == name })] = dev
		}
		byName[name] = dev
	}
	d.devices = byName
	out := make([]resourceapi.Device, len(devs))
	for i, dev := range devs {
		out[i] = dev.api
	}
	return out
}

// PrepareResourceClaims prepares each claim on its own: one claim's
// failure is its own result, not the call's.
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, c := range claims {
		devs, err := d.prepare(c)
		out[c.UID] = kubeletplugin.PrepareResult{Devices: devs, Err: err}
	}
	return out, nil
}

// UnprepareResourceClaims removes each claim's CDI spec and checkpoint
// entry; a claim never prepared (or already unprepared) succeeds.
func (d *Driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[types.UID]error, len(claims))
	for _, c := range claims {
		out[c.UID] = d.unprepare(c.UID)
	}
	return out, nil
}

func (d *Driver) unprepare(uid types.UID) error {
	if err := removeCDI(d.opts.CDIDir, uid); err != nil {
		return err
	}
	if _, ok := d.state.Claims[uid]; !ok {
		return nil
	}
	next := d.state.clone()
	delete(next.Claims, uid)
	if err := next.save(d.opts.DataDir); err != nil {
		return fmt.Errorf("unprepare claim %s: %w", uid, err)
	}
	d.state = next
	return nil
}

// ReleaseDeleted unprepares the checkpointed claims that are gone from the
// API (not found, or the name now belongs to another claim): claims deleted
// while the agent was down, whose Unprepare the kubelet could not deliver.
// Without it their memory would stay taken on the GPU for good. A claim the
// API cannot be asked about now stays for the next round. A claim in use
// cannot be gone: the API server keeps an allocated, reserved claim until
// its pods are.
func (d *Driver) ReleaseDeleted(ctx context.Context, kube kubernetes.Interface) ([]types.UID, error) {
	d.mu.Lock()
	held := maps.Clone(d.state.Claims)
	d.mu.Unlock()
	var gone []types.UID
	var errs []error
	for uid, pc := range held {
		c, err := kube.ResourceV1().ResourceClaims(pc.Namespace).Get(ctx, pc.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err), err == nil && c.UID != uid:
			gone = append(gone, uid)
		case err != nil:
			errs = append(errs, fmt.Errorf("read claim %s/%s: %w", pc.Namespace, pc.Name, err))
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, uid := range gone {
		if err := d.unprepare(uid); err != nil {
			errs = append(errs, err)
		}
	}
	return gone, errors.Join(errs...)
}

// HandleError logs background errors (publishing slices, the gRPC
// servers). All of them are retried by the helper or are the kubelet's to
// retry, so none stops the agent.
func (d *Driver) HandleError(ctx context.Context, err error, msg string) {
	utilruntime.HandleErrorWithContext(ctx, err, msg)
}

// WatchHealthStatus is not supported: an unhealthy GPU leaves the
// ResourceSlice instead (see the package documentation).
func (d *Driver) WatchHealthStatus(context.Context, chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}
