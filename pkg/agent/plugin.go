package agent

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Plugin is the kubelet device plugin of the shared-memory resource. It is
// safe for concurrent use: the kubelet calls it from many goroutines.
type Plugin struct {
	pluginapi.UnimplementedDevicePluginServer

	devices *table
	mpsRoot string // the MPS control daemon's host directory; empty without MPS
}

var _ pluginapi.DevicePluginServer = (*Plugin)(nil)

// newPlugin returns a plugin serving no GPU until SetGPUs.
func newPlugin(sharesPerGPU int64, mpsRoot string) *Plugin {
	return &Plugin{devices: newTable(int(sharesPerGPU)), mpsRoot: mpsRoot}
}

// SetGPUs changes the GPUs the plugin serves, and their health; open
// ListAndWatch streams send the new list when it differs.
func (p *Plugin) SetGPUs(gpus []GPU) {
	p.devices.set(gpus)
}

// GetDevicePluginOptions tells the kubelet to ask for preferred allocations.
func (p *Plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}, nil
}

// ListAndWatch sends every device with its health, then the whole list again
// each time it changes, until the kubelet goes away or the server stops.
func (p *Plugin) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	for {
		s := p.devices.load()
		if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: s.devices()}); err != nil {
			return err
		}
		select {
		case <-s.replaced:
		case <-stream.Context().Done():
			return nil
		}
	}
}

// GetPreferredAllocation keeps each container on one GPU, best fit, among
// the devices the kubelet offers. It never returns an error, which would fail
// the pod (see prefer): where nothing fits on one GPU it answers the
// kubelet's own order.
func (p *Plugin) GetPreferredAllocation(ctx context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	s := p.devices.load()
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, cr := range req.GetContainerRequests() {
		ids, ok := prefer(s, cr)
		if !ok {
			logf.FromContext(ctx).V(2).Info("No one GPU has room; preferring the kubelet's order",
				"size", cr.GetAllocationSize(), "available", len(cr.GetAvailableDeviceIDs()))
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

// Allocate gives each container the GPU its device IDs name and its memory
// limit. It looks up no pod and takes no lock: the IDs say everything. Under
// MPS it refuses a container the control daemon would not hold to its share
// (checkMPS).
func (p *Plugin) Allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	s := p.devices.load()
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range req.GetContainerRequests() {
		a, err := allocationOf(s, cr.GetDevicesIds())
		if err == nil && p.mpsRoot != "" {
			err = checkMPS(p.mpsRoot, a, s.unitMiB)
		}
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "allocate: %v", err)
		}
		resp.ContainerResponses = append(resp.ContainerResponses, a.response(s.unitMiB, p.mpsRoot))
	}
	logf.FromContext(ctx).V(2).Info("Allocated", "containers", len(resp.ContainerResponses))
	return resp, nil
}

// PreStartContainer is never called: the options do not ask for it.
func (p *Plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}
