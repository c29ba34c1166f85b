package agent

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// TestShareOffer: every GPU that serves shares offers the same number of
// devices, each the same share, sized by the smallest such GPU, so that any
// free device is a whole share on some GPU.
func TestShareOffer(t *testing.T) {
	h100 := func(uuid string) GPU {
		return GPU{UUID: uuid, MemoryMiB: 81559, MIGMode: MIGDisabled, Healthy: true}
	}
	t4 := GPU{UUID: "GPU-t4", MemoryMiB: 15360, MIGMode: MIGUnsupported, Healthy: true}
	mig := GPU{UUID: "GPU-mig", MemoryMiB: 40960, MIGMode: MIGEnabled, Healthy: true}
	unread := GPU{UUID: "GPU-unread", Healthy: false, Error: "nvml memory: Unknown Error"}
	nameless := GPU{Index: 3, Healthy: false, Error: "nvml uuid: GPU is lost"}
	offer := func(unit int64) *allocator.ShareOffer {
		return &allocator.ShareOffer{Resource: ResourceShare, UnitMiB: unit, SharesPerGPU: 4}
	}
	tests := map[string]struct {
		gpus    []GPU
		want    *allocator.ShareOffer
		devices map[string]string // device → health
	}{
		"two H100s": {gpus: []GPU{h100("GPU-a"), h100("GPU-b")}, want: offer(20389), devices: devicesOf(4, map[string]string{
			"GPU-a": pluginapi.Healthy, "GPU-b": pluginapi.Healthy})},
		"the smaller GPU sets the share of both": {gpus: []GPU{h100("GPU-a"), t4}, want: offer(3840), devices: devicesOf(4, map[string]string{
			"GPU-a": pluginapi.Healthy, "GPU-t4": pluginapi.Healthy})},
		"a MIG GPU serves no shares and sets nothing": {gpus: []GPU{mig, t4}, want: offer(3840), devices: devicesOf(4, map[string]string{
			"GPU-t4": pluginapi.Healthy})},
		"an unread GPU offers unhealthy devices and sets nothing": {gpus: []GPU{h100("GPU-a"), unread}, want: offer(20389),
			devices: devicesOf(4, map[string]string{"GPU-a": pluginapi.Healthy, "GPU-unread": pluginapi.Unhealthy})},
		"a GPU without a UUID offers nothing": {gpus: []GPU{nameless, t4}, want: offer(3840), devices: devicesOf(4, map[string]string{
			"GPU-t4": pluginapi.Healthy})},
		"MIG everywhere: no share":        {gpus: []GPU{mig}, want: nil, devices: map[string]string{}},
		"no GPU's memory known: no share": {gpus: []GPU{unread}, want: nil, devices: devicesOf(4, map[string]string{"GPU-unread": pluginapi.Unhealthy})},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got *allocator.ShareOffer
			if o, ok := shareOffer(tc.gpus, ResourceShare, 4); ok {
				got = &o
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("offer (-want +got):\n%s", diff)
			}
			devices := map[string]string{}
			for _, d := range newSnapshot(tc.gpus, 4).devices() {
				devices[d.ID] = d.Health
			}
			if diff := cmp.Diff(tc.devices, devices); diff != "" {
				t.Errorf("devices (-want +got):\n%s", diff)
			}
		})
	}
}

// devicesOf lists n devices of each GPU with its health.
func devicesOf(n int, health map[string]string) map[string]string {
	out := map[string]string{}
	for uuid, h := range health {
		for i := range n {
			out[DeviceID(uuid, i)] = h
		}
	}
	return out
}

// TestAllocateGivesSharesOfOneGPU: a container gets as many shares as it has
// devices, on the GPU they name, whichever GPU set the share size.
func TestAllocateGivesSharesOfOneGPU(t *testing.T) {
	p := newPlugin(4, "")
	p.SetGPUs([]GPU{
		{UUID: "GPU-a", MemoryMiB: 81559, MIGMode: MIGDisabled, Healthy: true},
		{UUID: "GPU-t4", MemoryMiB: 15360, MIGMode: MIGUnsupported, Healthy: true},
	})
	resp, err := p.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{"GPU-a::3"}},
		{DevicesIds: []string{"GPU-t4::0", "GPU-t4::2"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := []map[string]string{
		{"cdi": "gpuadmit.io/gpu=GPU-a", EnvVisibleDevices: "void", EnvMemoryLimitMiB: "3840"},
		{"cdi": "gpuadmit.io/gpu=GPU-t4", EnvVisibleDevices: "void", EnvMemoryLimitMiB: "7680"},
	}
	if diff := cmp.Diff(want, allocated(resp)); diff != "" {
		t.Errorf("Allocate answers (-want +got):\n%s", diff)
	}
}

// TestPreferNeverFails asks for preferences the plugin cannot keep on one
// GPU: it answers the kubelet's own order (must-include devices, then the
// offered ones as offered) and no error, which would fail the pod.
func TestPreferNeverFails(t *testing.T) {
	p := newPlugin(4, "")
	p.SetGPUs([]GPU{
		{UUID: "GPU-a", MemoryMiB: 81559, MIGMode: MIGDisabled, Healthy: true},
		{UUID: "GPU-b", MemoryMiB: 81559, MIGMode: MIGDisabled, Healthy: true},
	})
	tests := map[string]struct {
		available, must []string
		size            int32
		want            []string
	}{
		"one GPU has room: best fit": {available: []string{"GPU-b::0", "GPU-b::1", "GPU-a::2", "GPU-a::3", "GPU-a::1"}, size: 2,
			want: []string{"GPU-b::0", "GPU-b::1"}},
		"must-include devices pin the GPU": {available: []string{"GPU-a::0", "GPU-b::0", "GPU-b::3", "GPU-a::3"},
			must: []string{"GPU-a::0"}, size: 2, want: []string{"GPU-a::0", "GPU-a::3"}},
		"no one GPU has room": {available: []string{"GPU-b::3", "GPU-a::0", "GPU-b::2"}, size: 3,
			want: []string{"GPU-b::3", "GPU-a::0", "GPU-b::2"}},
		"must-include devices span GPUs": {available: []string{"GPU-a::0", "GPU-b::0", "GPU-a::1"},
			must: []string{"GPU-a::0", "GPU-b::0"}, size: 3, want: []string{"GPU-a::0", "GPU-b::0", "GPU-a::1"}},
		"devices of a GPU no longer served": {available: []string{"GPU-gone::0", "GPU-gone::1"}, size: 1,
			want: []string{"GPU-gone::0"}},
		"fewer offered than asked": {available: []string{"GPU-a::0"}, size: 2, want: []string{"GPU-a::0"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			resp, err := p.GetPreferredAllocation(context.Background(), &pluginapi.PreferredAllocationRequest{
				ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
					AvailableDeviceIDs: tc.available, MustIncludeDeviceIDs: tc.must, AllocationSize: tc.size,
				}},
			})
			if err != nil {
				t.Fatalf("GetPreferredAllocation failed: %v", err)
			}
			if diff := cmp.Diff(tc.want, resp.ContainerResponses[0].DeviceIDs); diff != "" {
				t.Errorf("preference (-want +got):\n%s", diff)
			}
		})
	}
}
