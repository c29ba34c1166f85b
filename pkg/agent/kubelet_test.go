package agent

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// This file is a fake kubelet that speaks the real gRPC APIs over unix
// sockets: the registration server a device plugin registers with, and the
// device manager's calls to the plugin (ListAndWatch, GetPreferredAllocation,
// Allocate, in the order and under the lock the kubelet's devicemanager in
// k8s.io/kubernetes/pkg/kubelet/cm/devicemanager uses). Like the real one it
// keeps its own record of which container holds which device (the real one
// checkpoints it, so it outlives plugin and kubelet restarts), offers only
// healthy devices no running container holds, and frees a pod's devices when
// the pod ends.

// waitFor is how long a test waits for something asynchronous.
const waitFor = 10 * time.Second

// fakeKubelet is the kubelet's registration server in a device-plugin dir.
type fakeKubelet struct {
	t             *testing.T
	dir           string
	registrations chan *pluginapi.RegisterRequest
	mu            sync.Mutex // the devicemanager's lock: admission is serial
	srv           *grpc.Server
	allocated     map[string]string // device → "pod/container" holding it: the checkpoint
}

type registrar struct {
	pluginapi.UnimplementedRegistrationServer
	k *fakeKubelet
}

func (r registrar) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	r.k.registrations <- req
	return &pluginapi.Empty{}, nil
}

// startKubelet serves the registration API at dir/kubelet.sock.
func startKubelet(t *testing.T, dir string) *fakeKubelet {
	k := &fakeKubelet{t: t, dir: dir, registrations: make(chan *pluginapi.RegisterRequest, 8), allocated: map[string]string{}}
	k.listen()
	t.Cleanup(k.stop)
	return k
}

func (k *fakeKubelet) listen() {
	l, err := net.Listen("unix", filepath.Join(k.dir, "kubelet.sock"))
	if err != nil {
		k.t.Fatal(err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, registrar{k: k})
	go srv.Serve(l) //nolint:errcheck // ends with Stop
	k.mu.Lock()
	k.srv = srv
	k.mu.Unlock()
}

func (k *fakeKubelet) stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.srv.Stop()
}

// restart does what a restarting kubelet does to the directory: it stops,
// removes every socket there (the plugins' too), and serves again. What is
// allocated survives, as the real kubelet's checkpoint does.
func (k *fakeKubelet) restart() {
	k.stop()
	entries, err := os.ReadDir(k.dir)
	if err != nil {
		k.t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.Remove(filepath.Join(k.dir, e.Name())); err != nil {
			k.t.Fatal(err)
		}
	}
	k.listen()
}

// registered waits for the next registration and connects to the plugin as
// the kubelet does, returning its device manager.
func (k *fakeKubelet) registered(ctx context.Context) *deviceManager {
	k.t.Helper()
	select {
	case req := <-k.registrations:
		if req.Version != pluginapi.Version || req.ResourceName != ResourceShare || !req.GetOptions().GetGetPreferredAllocationAvailable() {
			k.t.Fatalf("registration %+v: want version %s, resource %s, preferred allocation", req, pluginapi.Version, ResourceShare)
		}
		return connectPlugin(ctx, k, filepath.Join(k.dir, req.Endpoint))
	case <-time.After(waitFor):
		k.t.Fatal("the plugin did not register")
		return nil
	}
}

// end frees the devices of every container of pod, as the kubelet does for
// pods no longer active (ManagerImpl.UpdateAllocatedDevices, before each
// allocation).
func (k *fakeKubelet) end(pod string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for id, owner := range k.allocated {
		if strings.HasPrefix(owner, pod+"/") {
			delete(k.allocated, id)
		}
	}
}

// release gives back the devices of a container whose Allocate failed.
func (k *fakeKubelet) release(name string, ids []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, id := range ids {
		if k.allocated[id] == name {
			delete(k.allocated, id)
		}
	}
}

// holders returns which container holds each device.
func (k *fakeKubelet) holders() map[string]string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return maps.Clone(k.allocated)
}

// deviceManager is the kubelet's side of one registered plugin: the devices
// ListAndWatch reports, and the kubelet's allocations, which outlive it.
type deviceManager struct {
	t       *testing.T
	kubelet *fakeKubelet
	client  pluginapi.DevicePluginClient
	lists   chan []*pluginapi.Device // every list ListAndWatch sent

	mu      sync.Mutex
	devices map[string]string // device → health, as ListAndWatch last said
}

func connectPlugin(ctx context.Context, k *fakeKubelet, socket string) *deviceManager {
	t := k.t
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	m := &deviceManager{
		t: t, kubelet: k, client: pluginapi.NewDevicePluginClient(conn), lists: make(chan []*pluginapi.Device, 64),
		devices: map[string]string{},
	}
	opts, err := m.client.GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	if err != nil || !opts.GetPreferredAllocationAvailable {
		t.Fatalf("GetDevicePluginOptions = %v, %v; want preferred allocation", opts, err)
	}
	stream, err := m.client.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	go m.watch(stream)
	m.nextList() // the first list comes at once
	return m
}

func (m *deviceManager) watch(stream grpc.ServerStreamingClient[pluginapi.ListAndWatchResponse]) {
	for {
		resp, err := stream.Recv()
		if err != nil {
			close(m.lists)
			return
		}
		m.mu.Lock()
		m.devices = map[string]string{}
		for _, d := range resp.Devices {
			m.devices[d.ID] = d.Health
		}
		m.mu.Unlock()
		m.lists <- resp.Devices
	}
}

// nextList waits for ListAndWatch's next list.
func (m *deviceManager) nextList() []*pluginapi.Device {
	m.t.Helper()
	select {
	case l, ok := <-m.lists:
		if !ok {
			m.t.Fatal("ListAndWatch ended")
		}
		return l
	case <-time.After(waitFor):
		m.t.Fatal("ListAndWatch sent nothing")
		return nil
	}
}

// container is what the kubelet got for one container.
type container struct {
	name string
	ids  []string
	envs map[string]string
	resp *pluginapi.ContainerAllocateResponse
}

// allocate gives container name ("pod/container") n devices as the
// kubelet's devicemanager does (ManagerImpl.devicesToAllocate, then
// allocateContainerResources): under its lock, choose the devices, then call
// Allocate outside it, so Allocates run concurrently; a failed Allocate gives
// the devices back. reuse are the devices of an init container of the same
// pod, which the kubelet hands on to the app containers.
func (m *deviceManager) allocate(ctx context.Context, name string, n int, reuse ...string) (container, error) {
	k := m.kubelet
	k.mu.Lock()
	ids, err := m.devicesToAllocate(ctx, n, reuse)
	for _, id := range ids {
		if k.allocated[id] == "" { // a reused device stays its init container's, in the same pod
			k.allocated[id] = name
		}
	}
	k.mu.Unlock()
	if err != nil {
		return container{}, err
	}
	resp, err := m.client.Allocate(ctx, &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}},
	})
	if err != nil {
		k.release(name, ids)
		return container{}, err
	}
	c := resp.ContainerResponses[0]
	return container{name: name, ids: ids, envs: c.Envs, resp: c}, nil
}

// devicesToAllocate is the kubelet's choice of n devices (without NUMA
// affinity, as on a node without a topology manager policy): the reused
// devices first; then, if more are needed, the plugin's preference among
// the healthy devices no container holds, with the reused ones as must-include;
// then whatever is still missing from those available devices. The real
// kubelet fills that rest in map order; here it is sorted, so tests repeat.
// The caller holds the kubelet's lock: admission is serial.
func (m *deviceManager) devicesToAllocate(ctx context.Context, n int, reuse []string) ([]string, error) {
	chosen := slices.Clone(reuse[:min(n, len(reuse))])
	if len(chosen) == n {
		return chosen, nil
	}
	available := m.available()
	if len(available) < n-len(chosen) {
		return nil, fmt.Errorf("requested number of devices unavailable for %s. Requested: %d, Available: %d",
			ResourceShare, n-len(chosen), len(available))
	}
	preferred, err := m.preferred(ctx, append(slices.Clone(available), chosen...), chosen, n)
	if err != nil {
		return nil, fmt.Errorf("device plugin GetPreferredAllocation rpc failed with err: %w", err)
	}
	for _, id := range append(preferred, available...) {
		if len(chosen) < n && slices.Contains(available, id) && !slices.Contains(chosen, id) {
			chosen = append(chosen, id)
		}
	}
	return chosen, nil
}

// available is every healthy device no container holds, sorted.
func (m *deviceManager) available() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for id, health := range m.devices {
		if health == pluginapi.Healthy && m.kubelet.allocated[id] == "" {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// preferred asks GetPreferredAllocation for one container and returns its answer.
func (m *deviceManager) preferred(ctx context.Context, available, must []string, n int) ([]string, error) {
	resp, err := m.client.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
			AvailableDeviceIDs: available, MustIncludeDeviceIDs: must, AllocationSize: int32(n),
		}},
	})
	if err != nil {
		return nil, err
	}
	return resp.ContainerResponses[0].DeviceIDs, nil
}

// healthOf returns the health ListAndWatch last reported for each device.
func (m *deviceManager) healthOf() map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.devices)
}
