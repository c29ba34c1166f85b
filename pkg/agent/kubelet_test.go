package agent

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// This file is a fake kubelet that speaks the real gRPC APIs over unix
// sockets: the registration server a device plugin registers with, the
// device manager's calls to the plugin (ListAndWatch, GetPreferredAllocation,
// Allocate, in the order and under the lock the kubelet's devicemanager
// uses), and the PodResources server.

// waitFor is how long a test waits for something asynchronous.
const waitFor = 10 * time.Second

// fakeKubelet is the kubelet's registration server in a device-plugin dir.
type fakeKubelet struct {
	t             *testing.T
	dir           string
	registrations chan *pluginapi.RegisterRequest
	mu            sync.Mutex
	srv           *grpc.Server
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
	k := &fakeKubelet{t: t, dir: dir, registrations: make(chan *pluginapi.RegisterRequest, 8)}
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
// removes every socket there (the plugins' too), and serves again.
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
		return connectPlugin(ctx, k.t, filepath.Join(k.dir, req.Endpoint))
	case <-time.After(waitFor):
		k.t.Fatal("the plugin did not register")
		return nil
	}
}

// deviceManager is the kubelet's side of one registered plugin: the devices
// ListAndWatch reports and which container holds which device.
type deviceManager struct {
	t      *testing.T
	client pluginapi.DevicePluginClient
	lists  chan []*pluginapi.Device // every list ListAndWatch sent

	mu        sync.Mutex // the devicemanager's lock: choosing devices is serial
	devices   map[string]string
	allocated map[string]string // device → "pod/container"
}

func connectPlugin(ctx context.Context, t *testing.T, socket string) *deviceManager {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	m := &deviceManager{
		t: t, client: pluginapi.NewDevicePluginClient(conn), lists: make(chan []*pluginapi.Device, 64),
		devices: map[string]string{}, allocated: map[string]string{},
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
}

// allocate gives a container n devices as the kubelet's devicemanager does:
// under its lock, offer the healthy devices not allocated plus those it
// reuses from an init container (which must be included, and count in n),
// ask the plugin's preference, check it, record it; then call Allocate
// outside the lock, so Allocates run concurrently.
func (m *deviceManager) allocate(ctx context.Context, name string, n int, reuse ...string) (container, error) {
	m.mu.Lock()
	var available []string
	for id, health := range m.devices {
		if health == pluginapi.Healthy && m.allocated[id] == "" {
			available = append(available, id)
		}
	}
	available = append(available, reuse...)
	ids, err := m.prefer(ctx, available, reuse, n)
	if err != nil {
		m.mu.Unlock()
		return container{}, err
	}
	for _, id := range ids {
		m.allocated[id] = name
	}
	m.mu.Unlock()
	resp, err := m.client.Allocate(ctx, &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}},
	})
	if err != nil {
		return container{}, err
	}
	return container{name: name, ids: ids, envs: resp.ContainerResponses[0].Envs}, nil
}

// prefer asks GetPreferredAllocation and checks its answer as the kubelet
// must be able to use it: n devices, all offered, every reused one in it.
func (m *deviceManager) prefer(ctx context.Context, available, must []string, n int) ([]string, error) {
	resp, err := m.client.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
			AvailableDeviceIDs: available, MustIncludeDeviceIDs: must, AllocationSize: int32(n),
		}},
	})
	if err != nil {
		return nil, err
	}
	ids := resp.ContainerResponses[0].DeviceIDs
	for _, id := range must {
		if !slices.Contains(ids, id) {
			return nil, fmt.Errorf("preference %v lacks must-include %s", ids, id)
		}
	}
	for _, id := range ids {
		if !slices.Contains(available, id) {
			return nil, fmt.Errorf("preference %v holds %s, which was not offered", ids, id)
		}
	}
	if len(ids) != n {
		return nil, fmt.Errorf("preference has %d devices, %d asked", len(ids), n)
	}
	return ids, nil
}

// healthOf returns the health ListAndWatch last reported for each device.
func (m *deviceManager) healthOf() map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.devices)
}

// fakePodResources is the kubelet's PodResources server.
type fakePodResources struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	mu   sync.Mutex
	pods []*podresourcesv1.PodResources
}

func (f *fakePodResources) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &podresourcesv1.ListPodResourcesResponse{PodResources: slices.Clone(f.pods)}, nil
}

// record lists a pod's containers with their devices, as the kubelet does
// once they are allocated.
func (f *fakePodResources) record(pod string, cs ...container) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := &podresourcesv1.PodResources{Name: pod, Namespace: "default"}
	for _, c := range cs {
		p.Containers = append(p.Containers, &podresourcesv1.ContainerResources{
			Name:    c.name,
			Devices: []*podresourcesv1.ContainerDevices{{ResourceName: ResourceShare, DeviceIds: c.ids}},
		})
	}
	f.pods = append(f.pods, p)
}

// servePodResources serves f at a unix socket in dir and returns a client.
func servePodResources(t *testing.T, dir string, f *fakePodResources) PodResourcesLister {
	socket := filepath.Join(dir, "pod-resources.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(srv, f)
	go srv.Serve(l) //nolint:errcheck // ends with Stop
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return podresourcesv1.NewPodResourcesListerClient(conn)
}
