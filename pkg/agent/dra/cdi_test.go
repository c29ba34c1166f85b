package dra

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	oci "github.com/opencontainers/runtime-spec/specs-go"
	resourceapi "k8s.io/api/resource/v1"
	tagscdi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// TestPrepareWritesCompleteCDI prepares claims with NVIDIA's nvcdi over a
// fake driver root, then injects the kubelet's CDI devices the way
// containerd does (CDI's own cache) and checks what the container gets:
// the nodes of its GPUs and no other, the control nodes, the driver's
// libraries, the hooks, and its memory limit.
func TestPrepareWritesCompleteCDI(t *testing.T) {
	h100 := model(t, "H100-80GB")
	gpus := []allocator.NodeGPU{wholeGPU(h100, 0), wholeGPU(h100, 1), wholeGPU(h100, 2)}
	tests := map[string]struct {
		claim     *resourceapi.ResourceClaim
		wantNodes []string // besides the control nodes
		wantLimit string   // GPUADMIT_MEMORY_LIMIT_MIB
	}{
		"a 10 GiB share of GPU 1": {claim: claim("share", alloc{"gpu-1", 10}), wantNodes: []string{"/dev/nvidia1"}, wantLimit: "10240"},
		"the whole GPU 2":         {claim: claim("whole", alloc{"gpu-2", whole}), wantNodes: []string{"/dev/nvidia2"}, wantLimit: "81559"},
		"shares of GPUs 0 and 2":  {claim: claim("two", alloc{"gpu-0", 4}, alloc{"gpu-2", 8}), wantNodes: []string{"/dev/nvidia0", "/dev/nvidia2"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			gen, root := realEdits(t, gpus...)
			k := newKubeletWith(t, gen, gpus...)
			k.add(tc.claim)
			got := k.prepare(tc.claim)[string(tc.claim.UID)]
			if got.Error != "" {
				t.Fatalf("prepare failed: %s", got.Error)
			}
			var ids []string
			for _, d := range got.Devices {
				ids = append(ids, d.CdiDeviceIds...)
			}
			ctr := inject(t, k.opts.CDIDir, ids...)
			want := append([]string{"/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidiactl"}, tc.wantNodes...)
			if diff := cmp.Diff(sorted(want), sorted(devicePaths(ctr))); diff != "" {
				t.Errorf("the container's device nodes (-want +got):\n%s", diff)
			}
			if !slices.ContainsFunc(ctr.Mounts, func(m oci.Mount) bool { return m.Source == root.Lib("libcuda.so") }) {
				t.Errorf("the container does not mount %s; mounts %v", root.Lib("libcuda.so"), ctr.Mounts)
			}
			if !slices.ContainsFunc(ctr.Hooks.CreateContainer, func(h oci.Hook) bool { return slices.Contains(h.Args, "update-ldcache") }) {
				t.Errorf("the container's ldcache is not updated: createContainer hooks %v", ctr.Hooks.CreateContainer)
			}
			if !slices.Contains(ctr.Process.Env, "NVIDIA_VISIBLE_DEVICES=void") {
				t.Errorf("env %v lacks NVIDIA_VISIBLE_DEVICES=void", ctr.Process.Env)
			}
			if tc.wantLimit != "" && !slices.Contains(ctr.Process.Env, "GPUADMIT_MEMORY_LIMIT_MIB="+tc.wantLimit) {
				t.Errorf("env %v lacks GPUADMIT_MEMORY_LIMIT_MIB=%s", ctr.Process.Env, tc.wantLimit)
			}
		})
	}
}

// inject applies CDI devices to an empty container the way a CDI-aware
// runtime does, from the specs in dir.
func inject(t *testing.T, dir string, ids ...string) *oci.Spec {
	t.Helper()
	cache, err := tagscdi.NewCache(tagscdi.WithSpecDirs(dir), tagscdi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	if errs := cache.GetErrors(); len(errs) > 0 {
		t.Fatalf("the runtime refuses the specs in %s: %v", dir, errs)
	}
	ctr := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	if unresolved, err := cache.InjectDevices(ctr, ids...); err != nil {
		t.Fatalf("inject %v: %v (unresolved %v; specs %v)", ids, err, unresolved, specFiles(dir))
	}
	if ctr.Hooks == nil {
		ctr.Hooks = &oci.Hooks{}
	}
	return ctr
}

func devicePaths(s *oci.Spec) []string {
	var out []string
	for _, d := range s.Linux.Devices {
		out = append(out, d.Path)
	}
	return out
}

func specFiles(dir string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, "*"))
	return m
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
