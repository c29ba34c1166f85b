package agent

import (
	"path/filepath"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/clock"

	"github.com/gpuadmit/gpuadmit/pkg/agent/cdi"
)

// DefaultCDIDir is where container runtimes read CDI specs.
const DefaultCDIDir = "/var/run/cdi"

// DefaultPluginDir is the kubelet's device-plugin directory.
const DefaultPluginDir = pluginapi.DevicePluginPath

// DefaultMPSRoot is the host directory of the MPS control daemon that
// deploy/agent/mps runs. NVIDIA's device plugin uses /run/nvidia/mps; this
// one is gpuadmit's own so the two daemons never share pipes or shared memory.
const DefaultMPSRoot = "/run/gpuadmit/mps"

// DefaultSharesPerGPU is how many devices, each one share of memory, every
// GPU offers unless told otherwise.
const DefaultSharesPerGPU = 4

// Options configure the agent. The zero value serves gpuadmit.io/gpu-mem as
// 4 shares per GPU at the kubelet's default paths; only NodeName is needed,
// and only to publish.
type Options struct {
	// NodeName is the Node the agent publishes on (the downward API's
	// spec.nodeName); required by Run, unused by discovery.
	NodeName string
	// PublishOnly serves no device plugin: the agent only writes the GPUs
	// and the accounting capacity on its Node, for nodes whose GPUs
	// NVIDIA's device plugin serves (whole GPUs, MIG). False serves shares.
	PublishOnly bool
	// Resource is the shared-memory resource; empty means gpuadmit.io/gpu-mem.
	Resource string
	// SharesPerGPU is how many devices every GPU that serves shares offers,
	// each the same share of memory: the smallest such GPU's memory divided
	// by SharesPerGPU, rounded down; zero means 4.
	SharesPerGPU int64
	// MPS makes every container a client of the node's CUDA MPS control
	// daemon (deploy/agent/mps runs it, --mode=mps-control), as NVIDIA's
	// device plugin does: its pipe directory and shared memory mounted,
	// CUDA_MPS_PIPE_DIRECTORY set, its memory held to one share per client
	// process by the daemon. False sets only GPUADMIT_MEMORY_LIMIT_MIB,
	// which nothing enforces.
	MPS bool
	// MPSRoot is the MPS control daemon's host directory: pipes in pipe/,
	// logs in log/, its shared-memory tmpfs in shm/ (NVIDIA's layout). Empty
	// means /run/gpuadmit/mps; unused without MPS.
	MPSRoot string
	// PluginDir is the kubelet's device-plugin directory; empty means
	// /var/lib/kubelet/device-plugins.
	PluginDir string
	// CDI says where the node's driver is; Run makes Specs from it. The
	// zero value is a driver on the host's root.
	CDI cdi.Options
	// CDIDir receives the node's CDI spec, gpuadmit.io-gpu.json; empty
	// means /var/run/cdi.
	CDIDir string
	// Specs makes the node's CDI spec, written at start and on every
	// rediscovery; Run sets a cdi.Generator. Nil writes none (tests of
	// other parts), as PublishOnly does: there NVIDIA's plugin serves the GPUs.
	Specs NodeSpecs
	// Resync is how often GPUs are rediscovered and the Node is written
	// again; zero means a minute.
	Resync time.Duration
	// Retry is the wait before registering or publishing again after a
	// failure; zero means 5s.
	Retry time.Duration
	// RecoverAfter is how long a GPU must answer without a critical XID to be
	// healthy again; zero means 5 minutes.
	RecoverAfter time.Duration
	// ProfileNames reads MIG profile names from NVML; nil names them from
	// the catalog, except that Run, DiscoverNode and PrintCDI use
	// NVMLProfileName (real hardware's) when it is nil.
	ProfileNames ProfileNamer
	// OpenNVML opens the node's NVML for Run, DiscoverNode, PrintCDI and
	// RunMPSControl; nil loads the driver's libnvidia-ml.so.1 (OpenNVML).
	// Only a test build sets it (cmd/agent under the build tag
	// gpuadmit_fakenvml).
	OpenNVML NVMLOpener
	// Clock is injected by tests; nil means the real clock.
	Clock clock.WithTicker
}

func (o *Options) defaults() {
	if o.Resource == "" {
		o.Resource = ResourceShare
	}
	if o.SharesPerGPU <= 0 {
		o.SharesPerGPU = DefaultSharesPerGPU
	}
	if o.MPSRoot == "" {
		o.MPSRoot = DefaultMPSRoot
	}
	if o.PluginDir == "" {
		o.PluginDir = DefaultPluginDir
	}
	o.PluginDir = filepath.Clean(o.PluginDir) // file events name paths cleanly
	if o.CDIDir == "" {
		o.CDIDir = DefaultCDIDir
	}
	if o.Resync <= 0 {
		o.Resync = time.Minute
	}
	if o.Retry <= 0 {
		o.Retry = 5 * time.Second
	}
	if o.RecoverAfter <= 0 {
		o.RecoverAfter = 5 * time.Minute
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
}

// NVMLOpener opens and initializes a node's NVML; the func it returns
// shuts it down.
type NVMLOpener func(cdi.Options) (nvml.Interface, func(), error)

// open opens the NVML Run and the printers read: OpenNVML's, or the driver's.
func (o *Options) open() (nvml.Interface, func(), error) {
	if o.OpenNVML != nil {
		return o.OpenNVML(o.CDI)
	}
	return OpenNVML(o.CDI)
}

// nvmlProfileNames is ProfileNames, or real hardware's NVMLProfileName.
func (o *Options) nvmlProfileNames() ProfileNamer {
	if o.ProfileNames != nil {
		return o.ProfileNames
	}
	return NVMLProfileName
}

// mpsRoot is the MPS root containers are pointed at, empty without MPS.
func (o *Options) mpsRoot() string {
	if !o.MPS {
		return ""
	}
	return o.MPSRoot
}

// socketName is the plugin's socket file, named after its resource
// ("gpuadmit.io-gpu-mem.sock") so plugins of other resources can share the directory.
func (o *Options) socketName() string {
	return strings.ReplaceAll(o.Resource, "/", "-") + ".sock"
}
