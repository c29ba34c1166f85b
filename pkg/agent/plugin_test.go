package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// The harness's agent cuts each H100 (81559 MiB) into testShares devices,
// finer than the default, so that packing tests can ask for many at once.
const (
	testShares  = 79
	testUnitMiB = 81559 / testShares
)

// onGPU checks that a container's devices and CDI device name one GPU, that
// its environment holds its memory and no GPU for a legacy runtime, and
// returns that GPU's UUID.
func onGPU(t *testing.T, c container) string {
	t.Helper()
	uuid := cdiGPU(t, c.resp)
	if got := c.envs[EnvVisibleDevices]; got != VisibleNone {
		t.Errorf("container %s: %s = %q, want %q", c.name, EnvVisibleDevices, got, VisibleNone)
	}
	for _, id := range c.ids {
		if got, _, err := ParseDeviceID(id); err != nil || got != uuid {
			t.Errorf("container %s: device %s is not on %s, its visible GPU", c.name, id, uuid)
		}
	}
	if want := strconv.Itoa(len(c.ids) * testUnitMiB); c.envs[EnvMemoryLimitMiB] != want {
		t.Errorf("container %s: %s = %q, want %s", c.name, EnvMemoryLimitMiB, c.envs[EnvMemoryLimitMiB], want)
	}
	return uuid
}

// cdiGPU is the GPU of the one CDI device a container got.
func cdiGPU(t *testing.T, r *pluginapi.ContainerAllocateResponse) string {
	t.Helper()
	if len(r.CdiDevices) != 1 || !strings.HasPrefix(r.CdiDevices[0].Name, "gpuadmit.io/gpu=") {
		t.Errorf("CDI devices %v, want one gpuadmit.io/gpu=<uuid>", r.CdiDevices)
		return ""
	}
	return strings.TrimPrefix(r.CdiDevices[0].Name, "gpuadmit.io/gpu=")
}

// allocated is what each container of an Allocate answer gets: its
// environment, and its CDI devices under the key "cdi".
func allocated(resp *pluginapi.AllocateResponse) []map[string]string {
	var out []map[string]string
	for _, c := range resp.ContainerResponses {
		m := maps.Clone(c.Envs)
		for _, d := range c.CdiDevices {
			m["cdi"] = strings.TrimPrefix(m["cdi"]+","+d.Name, ",")
		}
		out = append(out, m)
	}
	return out
}

func TestPackingKeepsContainersOnOneGPU(t *testing.T) {
	h := newHarness(t, 2)
	_, m, _ := h.start()
	ctx := context.Background()
	steps := []struct {
		shares int
		want   string // the GPU, or the error's words
	}{
		{30, "GPU-h100-0"}, // a tie: the lower index
		{40, "GPU-h100-0"}, // 49 free there: the fullest that fits
		{20, "GPU-h100-1"}, // 9 left on GPU 0
		{50, "GPU-h100-1"},
		{10, "span GPUs"}, // 9 and 9 free: 18 in all, but never split
		{9, "GPU-h100-0"},
	}
	for i, s := range steps {
		c, err := m.allocate(ctx, fmt.Sprintf("c%d", i), s.shares)
		if strings.HasPrefix(s.want, "GPU-") {
			if err != nil {
				t.Fatalf("container of %d shares: %v", s.shares, err)
			}
			if got := onGPU(t, c); got != s.want {
				t.Errorf("container of %d shares went to %s, want %s", s.shares, got, s.want)
			}
			continue
		}
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), s.want) {
			t.Errorf("container of %d shares: error %v, want Allocate's InvalidArgument saying %q", s.shares, err, s.want)
		}
	}
}

func TestTwoContainersOfOnePod(t *testing.T) {
	h := newHarness(t, 2)
	_, m, _ := h.start()
	ctx := context.Background()
	if _, err := m.allocate(ctx, "other/main", 60); err != nil { // GPU 0 keeps 19 shares
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		shares int
		reuse  string // the container whose devices it reuses
		want   string
	}{
		{name: "pod/small", shares: 10, want: "GPU-h100-0"},
		{name: "pod/large", shares: 40, want: "GPU-h100-1"},
		{name: "pod/init", shares: 5, want: "GPU-h100-0"},
		{name: "pod/app", shares: 8, reuse: "pod/init", want: "GPU-h100-0"}, // an init container's devices, and 3 more beside them
	}
	got := map[string]container{}
	for _, tc := range tests {
		c, err := m.allocate(ctx, tc.name, tc.shares, got[tc.reuse].ids...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got[tc.name] = c
		if uuid := onGPU(t, c); uuid != tc.want {
			t.Errorf("%s went to %s, want %s", tc.name, uuid, tc.want)
		}
	}
	for _, id := range got["pod/init"].ids {
		if !slices.Contains(got["pod/app"].ids, id) {
			t.Errorf("pod/app %v does not reuse pod/init's %s", got["pod/app"].ids, id)
		}
	}
}

// TestAllocateManyContainers sends one Allocate for two containers, as the
// API allows, and expects each its own GPU and limit.
func TestAllocateManyContainers(t *testing.T) {
	h := newHarness(t, 2)
	_, m, _ := h.start()
	resp, err := m.client.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{"GPU-h100-1::3", "GPU-h100-1::4"}},
		{DevicesIds: []string{"GPU-h100-0::0"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := []map[string]string{
		{"cdi": "gpuadmit.io/gpu=GPU-h100-1", EnvVisibleDevices: "void", EnvMemoryLimitMiB: strconv.Itoa(2 * testUnitMiB)},
		{"cdi": "gpuadmit.io/gpu=GPU-h100-0", EnvVisibleDevices: "void", EnvMemoryLimitMiB: strconv.Itoa(testUnitMiB)},
	}
	if diff := cmp.Diff(want, allocated(resp)); diff != "" {
		t.Errorf("Allocate answers (-want +got):\n%s", diff)
	}
}

// TestAllocateResponse is what a container of a 4-way H100 gets, without
// MPS (two shares) and as an MPS client (one share): the pipe directory and
// the daemon's shared memory mounted where NVIDIA's device plugin mounts
// them, and no memory limit of its own to raise, since the daemon holds it.
func TestAllocateResponse(t *testing.T) {
	const unit = 81559 / 4
	root := mpsRoot(t, MPSLimits{"GPU-h100-0": unit})
	gpu := []*pluginapi.CDIDevice{{Name: "gpuadmit.io/gpu=GPU-h100-0"}}
	tests := map[string]struct {
		mpsRoot string
		ids     []string
		want    *pluginapi.ContainerAllocateResponse
	}{
		"without MPS": {ids: []string{"GPU-h100-0::1", "GPU-h100-0::3"}, want: &pluginapi.ContainerAllocateResponse{
			Envs:       map[string]string{EnvVisibleDevices: "void", EnvMemoryLimitMiB: strconv.Itoa(2 * unit)},
			CdiDevices: gpu,
		}},
		"with MPS": {mpsRoot: root, ids: []string{"GPU-h100-0::3"}, want: &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{
				EnvVisibleDevices: "void", EnvMemoryLimitMiB: strconv.Itoa(unit),
				"CUDA_MPS_PIPE_DIRECTORY": "/mps/pipe",
			},
			Mounts: []*pluginapi.Mount{
				{ContainerPath: "/mps/pipe", HostPath: root + "/pipe"},
				{ContainerPath: "/dev/shm", HostPath: root + "/shm"},
			},
			CdiDevices: gpu,
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := newPlugin(4, tc.mpsRoot)
			p.SetGPUs([]GPU{{UUID: "GPU-h100-0", MemoryMiB: 81559, MIGMode: MIGDisabled, Healthy: true}})
			resp, err := p.Allocate(context.Background(), &pluginapi.AllocateRequest{
				ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: tc.ids}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, resp.ContainerResponses[0], protocmp.Transform()); diff != "" {
				t.Errorf("Allocate (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAllocateUnderMPSRefuses: under MPS a container is served only where
// the control daemon holds its GPU to the plugin's share size, and with one
// share, the most the daemon's per-client limit gives.
func TestAllocateUnderMPSRefuses(t *testing.T) {
	const unit = 81559 / 4
	tests := map[string]struct {
		limits  MPSLimits // nil writes no file
		ids     []string
		wantErr string
	}{
		"no daemon limits yet": {ids: []string{"GPU-h100-0::0"},
			wantErr: "the MPS control daemon does not hold GPU GPU-h100-0 to 20389 MiB per client (its limits: map[])"},
		"a limit of another size": {limits: MPSLimits{"GPU-h100-0": 2 * unit}, ids: []string{"GPU-h100-0::0"},
			wantErr: "the MPS control daemon does not hold GPU GPU-h100-0 to 20389 MiB per client (its limits: map[GPU-h100-0:40778])"},
		"two shares": {limits: MPSLimits{"GPU-h100-0": unit}, ids: []string{"GPU-h100-0::0", "GPU-h100-0::1"},
			wantErr: "2 shares in one container: under MPS the control daemon holds every client to one share (20389 MiB), so a container takes exactly one"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			if tc.limits != nil {
				root = mpsRoot(t, tc.limits)
			}
			p := newPlugin(4, root)
			p.SetGPUs([]GPU{{UUID: "GPU-h100-0", MemoryMiB: 81559, MIGMode: MIGDisabled, Healthy: true}})
			_, err := p.Allocate(context.Background(), &pluginapi.AllocateRequest{
				ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: tc.ids}},
			})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Allocate error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// mpsRoot is an MPS root whose daemon holds the GPUs to limits.
func mpsRoot(t *testing.T, limits MPSLimits) string {
	t.Helper()
	root := t.TempDir()
	b, err := json.Marshal(limits)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, MPSLimitsFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestAgentMPSOption: --mps points containers at --mps-root, through the
// whole agent and the kubelet's gRPC.
func TestAgentMPSOption(t *testing.T) {
	h := newHarness(t, 1)
	o := h.options()
	o.MPS = true
	o.MPSRoot = mpsRoot(t, MPSLimits{h.gpus[0].UUID: testUnitMiB})
	_, m, _ := h.startWith(o)
	c, err := m.allocate(context.Background(), "a/main", 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.resp.Mounts; len(got) != 2 || got[0].HostPath != o.MPSRoot+"/pipe" {
		t.Errorf("mounts %v: want the pipe directory under %s first, then the shared memory", got, o.MPSRoot)
	}
}

func TestAllocateRefuses(t *testing.T) {
	h := newHarness(t, 2)
	_, m, _ := h.start()
	tests := map[string]struct {
		ids  []string
		want string
	}{
		"devices on two GPUs":       {ids: []string{"GPU-h100-0::1", "GPU-h100-1::1"}, want: "span GPUs GPU-h100-0 and GPU-h100-1"},
		"a GPU not served here":     {ids: []string{"GPU-gone::0"}, want: "GPU GPU-gone is not served here"},
		"a device past the GPU end": {ids: []string{"GPU-h100-0::79"}, want: "has 79 devices"},
		"an ID that names no GPU":   {ids: []string{"nvidia0"}, want: "is not <gpu-uuid>::<n>"},
		"no device number":          {ids: []string{"GPU-h100-0::x"}, want: "no device number"},
		"the same device twice":     {ids: []string{"GPU-h100-0::1", "GPU-h100-0::1"}, want: "listed twice"},
		"no devices":                {ids: nil, want: "no devices"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := m.client.Allocate(context.Background(), &pluginapi.AllocateRequest{
				ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: tc.ids}},
			})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Allocate(%v) error = %v, want InvalidArgument saying %q", tc.ids, err, tc.want)
			}
		})
	}
}

// TestConcurrentAllocationsNeverDoubleBook fills two GPUs with 11 pods of
// two containers each, all at once: every device goes to one container,
// every container stays on one GPU, and the node is then full.
func TestConcurrentAllocationsNeverDoubleBook(t *testing.T) {
	h := newHarness(t, 2)
	_, m, _ := h.start()
	ctx := context.Background()
	var mu sync.Mutex
	var got []container
	var wg sync.WaitGroup
	for pod := range 11 {
		wg.Go(func() {
			for _, name := range []string{"main", "sidecar"} {
				c, err := m.allocate(ctx, fmt.Sprintf("pod%d/%s", pod, name), 7)
				if err != nil {
					t.Errorf("pod%d/%s: %v", pod, name, err)
					return
				}
				mu.Lock()
				got = append(got, c)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	owner := map[string]string{}
	perGPU := map[string]int{}
	for _, c := range got {
		perGPU[onGPU(t, c)] += len(c.ids)
		for _, id := range c.ids {
			if o, ok := owner[id]; ok {
				t.Errorf("device %s given to %s and %s", id, o, c.name)
			}
			owner[id] = c.name
		}
	}
	if want := map[string]int{"GPU-h100-0": 77, "GPU-h100-1": 77}; !cmp.Equal(want, perGPU) {
		t.Errorf("shares per GPU = %v, want %v (11 containers of 7 on each)", perGPU, want)
	}
	if _, err := m.allocate(ctx, "late/main", 7); err == nil || !strings.Contains(err.Error(), "unavailable") {
		t.Errorf("a 23rd container of 7 shares: error %v, want the kubelet's: devices unavailable", err)
	}
}

// TestMPSGPUServesOnceItsLimitIsSet: under MPS a GPU's devices go to the
// kubelet unhealthy until the control daemon holds it to the share size
// (limits.json), so no pod is sent where Allocate would refuse it; they turn
// healthy at the next resync after the daemon set the limit.
func TestMPSGPUServesOnceItsLimitIsSet(t *testing.T) {
	h := newHarness(t, 1)
	o := h.options()
	o.MPS, o.MPSRoot = true, t.TempDir()
	_, m, _ := h.startWith(o)
	id := DeviceID(h.gpus[0].UUID, 0)
	eventually(t, "the GPU's devices unhealthy without the daemon's limit", func() bool {
		return m.healthOf()[id] == pluginapi.Unhealthy
	})
	b, err := json.Marshal(MPSLimits{h.gpus[0].UUID: testUnitMiB})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(o.MPSRoot, MPSLimitsFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the GPU's devices healthy once the daemon holds its limit", func() bool {
		h.clock.Step(time.Minute) // the default resync
		return m.healthOf()[id] == pluginapi.Healthy
	})
}
