package dra

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

const testNode = "node-a"

// kubelet is a fake kubelet: it calls the driver's DRA gRPC service on its
// socket as the kubelet's DRA manager does (pkg/kubelet/cm/dra), one batch
// of claims per call, and the driver reads the claims from a fake API.
type kubelet struct {
	t      *testing.T
	gpus   []allocator.NodeGPU
	opts   DriverOptions
	api    *fake.Clientset
	helper *kubeletplugin.Helper
	driver *Driver
	client drapb.DRAPluginClient
}

// newKubelet starts a driver for gpus with fresh directories and the
// stand-in CDI edits.
func newKubelet(t *testing.T, gpus ...allocator.NodeGPU) *kubelet {
	return newKubeletWith(t, standInEdits{}, gpus...)
}

// newKubeletWith starts a driver for gpus with fresh directories whose CDI
// edits come from edits. Unix socket paths are short (108 bytes), so the
// directory is not t.TempDir().
func newKubeletWith(t *testing.T, edits Edits, gpus ...allocator.NodeGPU) *kubelet {
	dir, err := os.MkdirTemp("", "dra")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	k := &kubelet{
		t: t, gpus: gpus, api: fake.NewClientset(),
		opts: DriverOptions{
			CDI: edits, DataDir: filepath.Join(dir, "data"), CDIDir: filepath.Join(dir, "cdi"),
			Devices: DeviceOptions{MIGUUIDs: migUUIDs(gpus...)},
		},
	}
	k.start()
	return k
}

// start runs a new Driver (reading the checkpoint) behind kubeletplugin's helper.
func (k *kubelet) start() {
	k.t.Helper()
	d, err := NewDriver(k.opts)
	if err != nil {
		k.t.Fatal(err)
	}
	if k.gpus != nil {
		d.SetGPUs(k.gpus, nil)
	}
	k.driver = d
	k.helper, err = kubeletplugin.Start(context.Background(), d,
		kubeletplugin.DriverName(DriverName), kubeletplugin.NodeName(testNode), kubeletplugin.KubeClient(k.api),
		kubeletplugin.PluginDataDirectoryPath(k.opts.DataDir), kubeletplugin.RegistrationService(false),
		kubeletplugin.HealthService(false))
	if err != nil {
		k.t.Fatalf("start plugin: %v", err)
	}
	conn, err := grpc.NewClient("unix://"+filepath.Join(k.opts.DataDir, "dra.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		k.t.Fatal(err)
	}
	k.client = drapb.NewDRAPluginClient(conn)
	k.t.Cleanup(func() { conn.Close(); k.helper.Stop() })
}

// restart stops the driver and starts a new one on the same directories.
func (k *kubelet) restart() {
	k.helper.Stop()
	k.start()
}

// reboot stops the driver, wipes the CDI directory as a reboot empties the
// tmpfs it is on (the plugin data directory and its checkpoint stay), and
// starts a new driver on gpus (nil keeps the node's GPUs).
func (k *kubelet) reboot(gpus ...allocator.NodeGPU) {
	k.t.Helper()
	k.helper.Stop()
	if err := os.RemoveAll(k.opts.CDIDir); err != nil {
		k.t.Fatal(err)
	}
	if gpus != nil {
		k.gpus = gpus
	}
	k.start()
}

// add stores allocated claims in the API.
func (k *kubelet) add(claims ...*resourceapi.ResourceClaim) {
	for _, c := range claims {
		if _, err := k.api.ResourceV1().ResourceClaims(c.Namespace).Create(context.Background(), c, metav1.CreateOptions{}); err != nil {
			k.t.Fatal(err)
		}
	}
}

// prepare calls NodePrepareResources for claims and returns the per-claim
// answers; a call-level error fails the test.
func (k *kubelet) prepare(claims ...*resourceapi.ResourceClaim) map[string]*drapb.NodePrepareResourceResponse {
	k.t.Helper()
	req := &drapb.NodePrepareResourcesRequest{}
	for _, c := range claims {
		req.Claims = append(req.Claims, &drapb.Claim{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)})
	}
	resp, err := k.client.NodePrepareResources(context.Background(), req)
	if err != nil {
		k.t.Fatalf("NodePrepareResources: %v", err)
	}
	if len(resp.Claims) != len(claims) {
		k.t.Fatalf("NodePrepareResources answered %d claims, asked %d", len(resp.Claims), len(claims))
	}
	return resp.Claims
}

// unprepare calls NodeUnprepareResources and returns the per-claim errors.
func (k *kubelet) unprepare(claims ...*resourceapi.ResourceClaim) map[string]string {
	k.t.Helper()
	req := &drapb.NodeUnprepareResourcesRequest{}
	for _, c := range claims {
		req.Claims = append(req.Claims, &drapb.Claim{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)})
	}
	resp, err := k.client.NodeUnprepareResources(context.Background(), req)
	if err != nil {
		k.t.Fatalf("NodeUnprepareResources: %v", err)
	}
	out := map[string]string{}
	for uid, r := range resp.Claims {
		out[uid] = r.Error
	}
	return out
}

// alloc is one allocated device of a test claim: gib is the memory the
// claim asked for; whole (-1) asks none of a shared H100, which then
// consumes the policy's default (79 GiB); 0 asks none of a MIG device.
const whole = -1

type alloc struct {
	device string
	gib    int64
}

// claim is an allocated claim as the scheduler leaves it: one request per
// device ("r0", "r1", …), consumed capacity and share IDs for shares, and
// for a whole GPU the policy's default, which it would have consumed.
func claim(name string, allocs ...alloc) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
	c.Status.Allocation = &resourceapi.AllocationResult{}
	for i, a := range allocs {
		req := resourceapi.DeviceRequest{Name: fmt.Sprintf("r%d", i), Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu-share.gpuadmit.io"}}
		res := resourceapi.DeviceRequestAllocationResult{Request: req.Name, Driver: DriverName, Pool: testNode, Device: a.device}
		switch {
		case a.gib > 0:
			q := resource.MustParse(fmt.Sprintf("%dGi", a.gib))
			req.Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{CapacityMemory: q}}
			res.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{CapacityMemory: q}
			res.ShareID = ptr.To(types.UID("share-" + name + req.Name))
		case a.gib == whole:
			res.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{CapacityMemory: resource.MustParse("79Gi")}
			res.ShareID = ptr.To(types.UID("share-" + name + req.Name))
		}
		c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, req)
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, res)
	}
	return c
}
