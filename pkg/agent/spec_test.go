package agent

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	oci "github.com/opencontainers/runtime-spec/specs-go"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	tagscdi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpuadmit/gpuadmit/pkg/agent/cdi"
	"github.com/gpuadmit/gpuadmit/pkg/agent/cdi/cditest"
)

// specHarness is the harness with two H100s whose UUIDs nvcdi takes, a fake
// driver root (minors 0 and 1), and the agent's options writing the node's
// spec with NVIDIA's nvcdi into a CDI directory.
func specHarness(t *testing.T, minors ...int) (*harness, Options, cditest.Root) {
	if minors == nil {
		minors = []int{0, 1}
	}
	r := readReading(t, "h100-80gb-hbm3-raw.txt")
	h := newHarness(t, 0)
	h.gpus = []*device{r.device(cditest.UUID(0)), r.device(cditest.UUID(1))}
	h.nvml = newFakeNVML(nvmlDevices(h.gpus)...)
	cditest.Teach(&h.nvml.Interface, h.gpus[0].Device, h.gpus[1].Device)
	root := cditest.NewRoot(t, minors...)
	gen, err := cdi.New(h.nvml, cdi.Options{DriverRoot: root.Dir, HookPath: root.HookPath})
	if err != nil {
		t.Fatal(err)
	}
	o := h.options()
	o.Specs, o.CDIDir = gen, t.TempDir()
	return h, o, root
}

func readSpec(t *testing.T, dir string) *cdispec.Spec {
	t.Helper()
	b, err := os.ReadFile(SpecFile(dir))
	if err != nil {
		t.Fatal(err)
	}
	spec := &cdispec.Spec{}
	if err := json.Unmarshal(b, spec); err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestAgentWritesNodeSpec: the agent writes a spec with a device per GPU
// that carries that GPU's node and no other's, the control nodes, libraries
// and hooks beside them, and Allocate names the container's GPU in it.
func TestAgentWritesNodeSpec(t *testing.T) {
	h, o, root := specHarness(t)
	_, m, _ := h.startWith(o)

	spec := readSpec(t, o.CDIDir)
	nodes := map[string][]string{}
	for _, d := range spec.Devices {
		for _, n := range d.ContainerEdits.DeviceNodes {
			nodes[d.Name] = append(nodes[d.Name], n.Path)
		}
	}
	want := map[string][]string{cditest.UUID(0): {"/dev/nvidia0"}, cditest.UUID(1): {"/dev/nvidia1"}}
	if diff := cmp.Diff(want, nodes); diff != "" {
		t.Errorf("the spec's GPU device nodes by device (-want +got):\n%s", diff)
	}

	c, err := m.allocate(context.Background(), "a/main", testShares) // all of one GPU: the lower index
	if err != nil {
		t.Fatal(err)
	}
	if got := onGPU(t, c); got != cditest.UUID(0) {
		t.Fatalf("the container got %s, want %s", got, cditest.UUID(0))
	}
	ctr := injectNode(t, o.CDIDir, c.resp.CdiDevices[0].Name)
	var devs []string
	for _, d := range ctr.Linux.Devices {
		devs = append(devs, d.Path)
	}
	slices.Sort(devs)
	if diff := cmp.Diff([]string{"/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia0", "/dev/nvidiactl"}, devs); diff != "" {
		t.Errorf("the container's device nodes (-want +got):\n%s", diff)
	}
	if !slices.ContainsFunc(ctr.Mounts, func(m oci.Mount) bool { return m.Source == root.Lib("libcuda.so") }) {
		t.Errorf("the container does not mount %s; mounts %v", root.Lib("libcuda.so"), ctr.Mounts)
	}
	if ctr.Hooks == nil || !slices.ContainsFunc(ctr.Hooks.CreateContainer, func(h oci.Hook) bool { return slices.Contains(h.Args, "create-symlinks") }) {
		t.Errorf("the container's library symlinks are not made: hooks %+v", ctr.Hooks)
	}
}

// injectNode applies a CDI device to an empty container as containerd
// does, from the specs in dir.
func injectNode(t *testing.T, dir, id string) *oci.Spec {
	t.Helper()
	cache, err := tagscdi.NewCache(tagscdi.WithSpecDirs(dir), tagscdi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	ctr := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	if _, err := cache.InjectDevices(ctr, id); err != nil {
		t.Fatalf("inject %s: %v", id, err)
	}
	return ctr
}

// TestRediscoveryRewritesNodeSpec: a GPU that leaves is gone from the spec
// at the next resync.
func TestRediscoveryRewritesNodeSpec(t *testing.T) {
	h, o, _ := specHarness(t)
	var count atomic.Int64
	count.Store(2)
	h.nvml.DeviceGetCountFunc = func() (int, nvml.Return) { return int(count.Load()), nvml.SUCCESS }
	h.startWith(o)
	if n := len(readSpec(t, o.CDIDir).Devices); n != 2 {
		t.Fatalf("the spec has %d devices, want 2", n)
	}
	count.Store(1)
	eventually(t, "the spec holds only GPU 0", func() bool {
		h.clock.Step(time.Minute) // the default resync
		d := readSpec(t, o.CDIDir).Devices
		return len(d) == 1 && d[0].Name == cditest.UUID(0)
	})
}

// TestAGPUWithoutDeviceNodeServesUnhealthy: a GPU whose /dev/nvidiaN is
// missing gets no CDI device; the agent still starts, serves the other GPU,
// and reports the first one's devices unhealthy, so the kubelet never hands
// out a device no runtime could inject.
func TestAGPUWithoutDeviceNodeServesUnhealthy(t *testing.T) {
	h, o, _ := specHarness(t, 0) // no /dev/nvidia1
	_, m, _ := h.startWith(o)
	var names []string
	for _, d := range readSpec(t, o.CDIDir).Devices {
		names = append(names, d.Name)
	}
	if !slices.Equal(names, []string{cditest.UUID(0)}) {
		t.Errorf("spec devices %v, want only %s", names, cditest.UUID(0))
	}
	eventually(t, "GPU 0's devices healthy and GPU 1's unhealthy", func() bool {
		health := m.healthOf()
		return health[DeviceID(cditest.UUID(0), 0)] == pluginapi.Healthy && health[DeviceID(cditest.UUID(1), 0)] == pluginapi.Unhealthy
	})
}
