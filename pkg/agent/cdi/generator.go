package cdi

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/nvidia-container-toolkit/pkg/nvcdi"
	"github.com/NVIDIA/nvidia-container-toolkit/pkg/nvcdi/transform"
	transformroot "github.com/NVIDIA/nvidia-container-toolkit/pkg/nvcdi/transform/root"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// Kind is the vendor/class of gpuadmit's CDI devices: "gpuadmit.io/gpu=<name>".
const Kind = "gpuadmit.io/gpu"

// Generator makes the CDI edits of the node's GPUs. It caches what it made
// (nvcdi walks the driver root on every call) until Forget; it is safe for
// concurrent use.
type Generator struct {
	opts      Options
	lib       nvcdi.Interface
	transform transform.Transformer

	mu      sync.Mutex
	common  *cdispec.ContainerEdits
	devices map[string]cdispec.ContainerEdits
}

// New returns a generator reading the driver of o through nv, which the
// caller has initialized (nvcdi initializes and shuts it down again around
// each query; NVML counts them). It fails, saying which flag to look at,
// when the edits every GPU needs cannot be made: no driver libraries of
// NVML's driver version under the driver root, no /dev/nvidiactl under the
// dev root.
func New(nv nvml.Interface, o Options) (*Generator, error) {
	o.defaults()
	lib, err := nvcdi.New(
		nvcdi.WithNvmlLib(nv),
		nvcdi.WithMode(nvcdi.ModeNvml),
		nvcdi.WithDriverRoot(o.ContainerDriverRoot),
		nvcdi.WithDevRoot(o.containerDevRoot()),
		nvcdi.WithNVIDIACDIHookPath(o.HookPath),
		nvcdi.WithVendor("gpuadmit.io"), nvcdi.WithClass("gpu"),
		nvcdi.WithDeviceNamers(uuidNamer()),
		// libnvidia-sandboxutils is dlopened behind NVML's back and gives
		// nothing NVML does not; NVIDIA's DRA driver turns it off too.
		nvcdi.WithFeatureFlags(nvcdi.FeatureDisableNvsandboxUtils),
		nvcdi.WithLogger(logger{o.Log}),
	)
	if err != nil {
		return nil, fmt.Errorf("nvcdi for driver root %s: %w", o.ContainerDriverRoot, err)
	}
	g := &Generator{
		opts: o, lib: lib, devices: map[string]cdispec.ContainerEdits{},
		transform: transformroot.NewDriverTransformer(
			transformroot.WithDriverRoot(o.ContainerDriverRoot), transformroot.WithTargetDriverRoot(o.DriverRoot),
			transformroot.WithDevRoot(o.containerDevRoot()), transformroot.WithTargetDevRoot(o.DevRoot),
		),
	}
	if _, err := g.CommonEdits(); err != nil {
		return nil, err
	}
	return g, nil
}

func uuidNamer() nvcdi.DeviceNamer {
	n, _ := nvcdi.NewDeviceNamer(nvcdi.DeviceNameStrategyUUID) // a known strategy never fails
	return n
}

// Forget drops the cached edits, so the next call reads the driver again:
// after a rediscovery, since a GPU's minor number may change with its MIG mode.
func (g *Generator) Forget() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.common, g.devices = nil, map[string]cdispec.ContainerEdits{}
}

// CommonEdits are what every GPU container needs, whatever its GPU: the
// control device nodes, the driver's libraries and binaries, their hooks,
// and NVIDIA_VISIBLE_DEVICES=void.
func (g *Generator) CommonEdits() (cdispec.ContainerEdits, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.common == nil {
		e, err := g.commonEdits()
		if err != nil {
			return cdispec.ContainerEdits{}, err
		}
		g.common = &e
	}
	return clone(*g.common), nil
}

func (g *Generator) commonEdits() (cdispec.ContainerEdits, error) {
	e, err := g.lib.GetCommonEdits()
	if err != nil {
		return cdispec.ContainerEdits{}, fmt.Errorf("CDI edits of the driver under %s: %w (is --driver-root right?)", g.opts.ContainerDriverRoot, err)
	}
	out, err := g.hostPaths(*e.ContainerEdits)
	if err != nil {
		return out, err
	}
	if !hasNode(out, isControlNode) {
		return out, fmt.Errorf("CDI edits of the driver under %s: no /dev/nvidiactl under dev root %s (is --dev-root right?)",
			g.opts.ContainerDriverRoot, g.opts.containerDevRoot())
	}
	return out, nil
}

// DeviceEdits are what a container gets for one GPU or MIG device, named by
// its UUID: its own device nodes and hooks, nothing of another GPU.
func (g *Generator) DeviceEdits(uuid string) (cdispec.ContainerEdits, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if e, ok := g.devices[uuid]; ok {
		return clone(e), nil
	}
	e, err := g.deviceEdits(uuid)
	if err != nil {
		return e, err
	}
	g.devices[uuid] = e
	return clone(e), nil
}

func (g *Generator) deviceEdits(uuid string) (cdispec.ContainerEdits, error) {
	devs, err := g.lib.GetDeviceSpecsByID(uuid)
	if err != nil {
		return cdispec.ContainerEdits{}, fmt.Errorf("CDI edits of GPU %s: %w", uuid, err)
	}
	if len(devs) != 1 {
		return cdispec.ContainerEdits{}, fmt.Errorf("CDI edits of GPU %s: nvcdi made %d devices, want 1", uuid, len(devs))
	}
	e, err := g.hostPaths(devs[0].ContainerEdits)
	if err != nil {
		return e, fmt.Errorf("CDI edits of GPU %s: %w", uuid, err)
	}
	if !hasNode(e, isGPUNode) {
		return e, fmt.Errorf("CDI edits of GPU %s: no /dev/nvidia<minor> under dev root %s (is --dev-root right?)", uuid, g.opts.containerDevRoot())
	}
	return e, nil
}

// hostPaths rewrites paths under the agent's view of the roots as the host
// sees them.
func (g *Generator) hostPaths(e cdispec.ContainerEdits) (cdispec.ContainerEdits, error) {
	s := &cdispec.Spec{ContainerEdits: e}
	if err := g.transform.Transform(s); err != nil {
		return e, fmt.Errorf("host paths of the CDI edits: %w", err)
	}
	return s.ContainerEdits, nil
}

// NodeSpec is the node's spec for the given GPUs, a device per GPU named
// by its UUID. A GPU whose edits cannot be made is left out and named in
// the error; the spec holds the others.
func (g *Generator) NodeSpec(uuids []string) (*cdispec.Spec, error) {
	common, err := g.CommonEdits()
	if err != nil {
		return nil, err
	}
	spec := &cdispec.Spec{Kind: Kind, ContainerEdits: common}
	var errs []error
	for _, uuid := range uuids {
		e, err := g.DeviceEdits(uuid)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		spec.Devices = append(spec.Devices, cdispec.Device{Name: uuid, ContainerEdits: e})
	}
	return spec, errors.Join(errs...)
}

// gpuNode is a GPU's own device node; a MIG device's is its parent's.
var gpuNode = regexp.MustCompile(`^/dev/nvidia[0-9]+$`)

func isGPUNode(p string) bool { return gpuNode.MatchString(p) }

func isControlNode(p string) bool { return p == "/dev/nvidiactl" }

func hasNode(e cdispec.ContainerEdits, match func(string) bool) bool {
	return slices.ContainsFunc(e.DeviceNodes, func(n *cdispec.DeviceNode) bool { return n != nil && match(n.Path) })
}

// clone copies e deep enough that a caller may append to and edit it
// without touching the cache.
func clone(e cdispec.ContainerEdits) cdispec.ContainerEdits {
	out := e
	out.Env, out.AdditionalGIDs = slices.Clone(e.Env), slices.Clone(e.AdditionalGIDs)
	out.DeviceNodes = cloneEach(e.DeviceNodes, func(n cdispec.DeviceNode) cdispec.DeviceNode { return n })
	out.Hooks = cloneEach(e.Hooks, func(h cdispec.Hook) cdispec.Hook {
		h.Args, h.Env = slices.Clone(h.Args), slices.Clone(h.Env)
		return h
	})
	out.Mounts = cloneEach(e.Mounts, func(m cdispec.Mount) cdispec.Mount {
		m.Options = slices.Clone(m.Options)
		return m
	})
	return out
}

// cloneEach copies each element of in through deep, keeping nil as nil.
func cloneEach[T any](in []*T, deep func(T) T) []*T {
	if in == nil {
		return nil
	}
	out := make([]*T, len(in))
	for i, p := range in {
		c := deep(*p)
		out[i] = &c
	}
	return out
}
