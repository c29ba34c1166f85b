package cdi_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	oci "github.com/opencontainers/runtime-spec/specs-go"
	tagscdi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpuadmit/gpuadmit/pkg/agent/cdi"
	"github.com/gpuadmit/gpuadmit/pkg/agent/cdi/cditest"
)

// generator is a generator for two fake GPUs (minors 0 and 1) on a fake driver root.
func generator(t *testing.T, o cdi.Options) (*cdi.Generator, cditest.Root) {
	t.Helper()
	root := cditest.NewRoot(t, 0, 1)
	if o.DriverRoot == "" {
		o.DriverRoot = root.Dir
	}
	o.HookPath = root.HookPath
	g, err := cdi.New(cditest.NVML(cditest.GPUs(2)...), o)
	if err != nil {
		t.Fatal(err)
	}
	return g, root
}

// nodes are the container paths of the edits' device nodes by host path.
func nodes(e cdispec.ContainerEdits) map[string]string {
	out := map[string]string{}
	for _, n := range e.DeviceNodes {
		host := n.HostPath
		if host == "" {
			host = n.Path
		}
		out[n.Path] = host
	}
	return out
}

// hookNames are the nvidia-cdi-hook subcommands the edits run, with the hook binaries.
func hookNames(e cdispec.ContainerEdits) map[string]string {
	out := map[string]string{}
	for _, h := range e.Hooks {
		if len(h.Args) > 1 {
			out[h.Args[1]] = h.Path
		}
	}
	return out
}

func mounts(e cdispec.ContainerEdits) map[string]string {
	out := map[string]string{}
	for _, m := range e.Mounts {
		out[m.ContainerPath] = m.HostPath
	}
	return out
}

func TestCommonEdits(t *testing.T) {
	g, root := generator(t, cdi.Options{})
	e, err := g.CommonEdits()
	if err != nil {
		t.Fatal(err)
	}
	dev := func(name string) string { return filepath.Join(root.Dir, "dev", name) }
	wantNodes := map[string]string{
		"/dev/nvidiactl": dev("nvidiactl"), "/dev/nvidia-uvm": dev("nvidia-uvm"), "/dev/nvidia-uvm-tools": dev("nvidia-uvm-tools"),
	}
	if diff := cmp.Diff(wantNodes, nodes(e)); diff != "" {
		t.Errorf("control device nodes (-want +got):\n%s", diff)
	}
	for _, lib := range []string{"libcuda.so", "libnvidia-ml.so"} {
		in := "/usr/lib64/" + lib + "." + cditest.DriverVersion
		if got := mounts(e)[in]; got != root.Lib(lib) {
			t.Errorf("mount of %s: host path %q, want %q; mounts %v", in, got, root.Lib(lib), mounts(e))
		}
	}
	for _, hook := range []string{"create-symlinks", "update-ldcache"} {
		if got := hookNames(e)[hook]; got != root.HookPath {
			t.Errorf("hook %s runs %q, want %q; hooks %v", hook, got, root.HookPath, hookNames(e))
		}
	}
	if !slices.Contains(e.Env, "NVIDIA_VISIBLE_DEVICES=void") {
		t.Errorf("env %v lacks NVIDIA_VISIBLE_DEVICES=void, which keeps a legacy NVIDIA runtime from adding devices", e.Env)
	}
}

func TestDeviceEditsAreTheGPUsOwn(t *testing.T) {
	g, root := generator(t, cdi.Options{})
	for i, uuid := range []string{cditest.UUID(0), cditest.UUID(1)} {
		e, err := g.DeviceEdits(uuid)
		if err != nil {
			t.Fatal(err)
		}
		own := "/dev/nvidia" + string(rune('0'+i))
		want := map[string]string{own: filepath.Join(root.Dir, own)}
		if diff := cmp.Diff(want, nodes(e)); diff != "" {
			t.Errorf("%s: device nodes (-want +got):\n%s", uuid, diff)
		}
	}
}

func TestDeviceEditsRefuseAGPUWithoutItsNode(t *testing.T) {
	root := cditest.NewRoot(t, 0) // GPU 1's /dev/nvidia1 is missing
	g, err := cdi.New(cditest.NVML(cditest.GPUs(2)...), cdi.Options{DriverRoot: root.Dir, HookPath: root.HookPath})
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.DeviceEdits(cditest.UUID(1))
	if err == nil || !strings.Contains(err.Error(), "no /dev/nvidia<minor> under dev root") {
		t.Errorf("edits of a GPU without its device node: error %v, want one naming the dev root", err)
	}
}

func TestEmptyDriverRootFails(t *testing.T) {
	_, err := cdi.New(cditest.NVML(cditest.GPUs(1)...), cdi.Options{DriverRoot: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "--driver-root") {
		t.Errorf("a driver root without a driver: error %v, want one that points at --driver-root", err)
	}
}

// TestContainerDriverRoot: an agent that sees the host's driver root at
// another path writes the host's paths.
func TestContainerDriverRoot(t *testing.T) {
	root := cditest.NewRoot(t, 0)
	g, err := cdi.New(cditest.NVML(cditest.GPUs(1)...), cdi.Options{
		DriverRoot: "/run/nvidia/driver", ContainerDriverRoot: root.Dir, HookPath: "/usr/local/bin/nvidia-cdi-hook",
	})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := g.NodeSpec([]string{cditest.UUID(0)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range []cdispec.ContainerEdits{spec.ContainerEdits, spec.Devices[0].ContainerEdits} {
		for _, host := range nodes(e) {
			got = append(got, host)
		}
		for _, host := range mounts(e) {
			got = append(got, host)
		}
	}
	for _, p := range got {
		if strings.HasPrefix(p, root.Dir) {
			t.Errorf("host path %s is the agent's view of the root, not the host's /run/nvidia/driver", p)
		}
	}
	if want := "/run/nvidia/driver/dev/nvidia0"; nodes(spec.Devices[0].ContainerEdits)["/dev/nvidia0"] != want {
		t.Errorf("GPU 0's node is %v, want host path %s", nodes(spec.Devices[0].ContainerEdits), want)
	}
}

// TestRuntimeApplies injects the node spec the way containerd does (CDI's
// own cache) and checks what the container would get.
func TestRuntimeApplies(t *testing.T) {
	g, root := generator(t, cdi.Options{})
	spec, err := g.NodeSpec([]string{cditest.UUID(0), cditest.UUID(1)})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := cdi.WriteSpec(filepath.Join(dir, "gpuadmit.json"), spec); err != nil {
		t.Fatal(err)
	}
	cache, err := tagscdi.NewCache(tagscdi.WithSpecDirs(dir), tagscdi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	if errs := cache.GetErrors(); len(errs) > 0 {
		t.Fatalf("the runtime refuses the spec: %v", errs)
	}
	ctr := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	if _, err := cache.InjectDevices(ctr, cdi.Kind+"="+cditest.UUID(1)); err != nil {
		t.Fatalf("inject: %v", err)
	}
	var devs []string
	for _, d := range ctr.Linux.Devices {
		devs = append(devs, d.Path+":"+string(rune('0'+d.Major/100))) // a major's first digit is enough to tell 195 from 510
	}
	want := []string{"/dev/nvidia-uvm-tools:5", "/dev/nvidia-uvm:5", "/dev/nvidia1:1", "/dev/nvidiactl:1"}
	if diff := cmp.Diff(want, devs, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("the container's devices (-want +got):\n%s", diff)
	}
	if !slices.ContainsFunc(ctr.Mounts, func(m oci.Mount) bool { return m.Source == root.Lib("libcuda.so") }) {
		t.Errorf("the container does not mount %s: %v", root.Lib("libcuda.so"), ctr.Mounts)
	}
	if ctr.Hooks == nil || len(ctr.Hooks.CreateContainer) == 0 {
		t.Errorf("the container runs no createContainer hooks")
	}
}
