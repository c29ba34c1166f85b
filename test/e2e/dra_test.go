package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpuadmit/gpuadmit/pkg/agent"
	"github.com/gpuadmit/gpuadmit/pkg/agent/dra"
)

// The DRA tests run the agent in DRA mode on fake NVML (go-nvml's dgxa100
// mock: A100 40GB, 40960 MiB) for kwok nodes, publishing ResourceSlices
// only (kwok runs no kubelet, so preparing is tested in pkg/agent/dra), and
// let the real scheduler allocate claims from templates that the
// resource-claim controller turns into claims. Pods carry only resource
// claims, which gpuadmit's webhook does not take for GPU pods.

const draLabel = "gpuadmit.io/dra-e2e"

// draNamespace creates a namespace for one test, deleted at its end, and
// installs deploy/dra's DeviceClasses and policies.
func draNamespace(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	if err := env.Apply(ctx, filepath.Join(root, "deploy/dra/deviceclasses.yaml")); err != nil {
		t.Fatal(err)
	}
	installDRAPolicies(t, ctx)
	return name
}

// fakeGPUs is n A100 40GB GPUs; migProfiles, when given, turn GPU 0's MIG
// on with one GPU instance of each profile id.
func fakeGPUs(n int, migProfiles ...int) *dgxa100.Server {
	s := dgxa100.New()
	for _, d := range s.Devices {
		d.(*dgxa100.Device).Config.Name = "NVIDIA A100-SXM4-40GB"
	}
	s.DeviceGetCountFunc = func() (int, nvml.Return) { return n, nvml.SUCCESS }
	s.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
	if len(migProfiles) > 0 {
		d := s.Devices[0].(*dgxa100.Device)
		d.MigMode = nvml.DEVICE_MIG_ENABLE
		for _, p := range migProfiles {
			info, _ := d.GetGpuInstanceProfileInfo(p)
			placements, _ := d.GetGpuInstancePossiblePlacements(&info)
			d.CreateGpuInstanceWithPlacement(&info, &placements[len(placements)-1])
		}
	}
	return s
}

// draNode creates a kwok node labelled draLabel=group and runs the DRA
// agent for it until the test ends; it returns once the node's slice
// lists devices devices.
func draNode(t *testing.T, ctx context.Context, name, group string, gpus agent.NVML, devices int) {
	t.Helper()
	node := &corev1.Node{}
	node.Name = name
	node.Labels = map[string]string{draLabel: group, "kubernetes.io/hostname": name}
	node.Status.Allocatable = corev1.ResourceList{"cpu": resource.MustParse("64"), "memory": resource.MustParse("512Gi"), "pods": resource.MustParse("200")}
	node.Status.Capacity = node.Status.Allocatable.DeepCopy()
	if err := env.AddNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dir, err := os.MkdirTemp("", "dra-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		o := dra.Options{NodeName: name, PublishOnly: true, Driver: dra.DriverOptions{DataDir: dir, CDIDir: dir}}
		if err := dra.New(gpus, env.Client, kube, o).Run(actx); err != nil {
			t.Errorf("DRA agent of %s: %v", name, err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		os.RemoveAll(dir)
		_ = env.Client.Delete(context.Background(), node)
		_ = env.Client.DeleteAllOf(context.Background(), &resourceapi.ResourceSlice{}, client.MatchingFields{"spec.nodeName": name})
	})
	waitFor(t, "slice of "+name, 60*time.Second, func() (bool, string) {
		n := len(nodeDevices(ctx, name))
		return n == devices, fmt.Sprintf("%d devices published, want %d", n, devices)
	})
}

// nodeDevices lists the devices gpu.gpuadmit.io publishes for a node.
func nodeDevices(ctx context.Context, node string) []resourceapi.Device {
	list := &resourceapi.ResourceSliceList{}
	if err := env.Client.List(ctx, list, client.MatchingFields{"spec.nodeName": node}); err != nil {
		return nil
	}
	var out []resourceapi.Device
	for _, s := range list.Items {
		if s.Spec.Driver == dra.DriverName {
			out = append(out, s.Spec.Devices...)
		}
	}
	return out
}

// claimPod creates a claim template of class (with gib of memory, none
// when 0) as gpuadmit's reconciler does, and a pod using it, kept to nodes
// matching selector.
func claimPod(t *testing.T, ctx context.Context, ns, name, class string, gib int64, selector map[string]string) *corev1.Pod {
	t.Helper()
	p, err := createClaimPod(ctx, ns, name, class, gib, selector)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// createClaimPod is claimPod; opts change the pod before it is created.
func createClaimPod(ctx context.Context, ns, name, class string, gib int64, selector map[string]string, opts ...func(*corev1.Pod)) (*corev1.Pod, error) {
	req := resourceapi.DeviceRequest{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class}}
	if gib > 0 {
		req.Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
			dra.CapacityMemory: resource.MustParse(fmt.Sprintf("%dGi", gib)),
		}}
	}
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	tmpl.Spec.Spec.Devices.Requests = []resourceapi.DeviceRequest{req}
	rec, err := reconciler() // only gpuadmit writes templates of its classes
	if err != nil {
		return nil, err
	}
	if err := rec.Create(ctx, tmpl); err != nil {
		return nil, err
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	p.Spec.NodeSelector = selector
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl.Name}}
	p.Spec.Containers = []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}}
	for _, o := range opts {
		o(p)
	}
	return p, env.Client.Create(ctx, p)
}

// podState is "node <name>" once bound, "unschedulable" once the scheduler
// gave up on it for now, "" before either.
func podState(ctx context.Context, p *corev1.Pod) string {
	got := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
		return ""
	}
	if got.Spec.NodeName != "" {
		return "node " + got.Spec.NodeName
	}
	for _, c := range got.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return "unschedulable"
		}
	}
	return ""
}

func waitState(t *testing.T, ctx context.Context, p *corev1.Pod, want string) {
	t.Helper()
	waitFor(t, p.Name+" "+want, 90*time.Second, func() (bool, string) {
		got := podState(ctx, p)
		return got == want, "state " + got
	})
}

// allocation is one device a pod's claim got and the memory it consumed.
type allocation struct {
	pool, device string
	consumed     resource.Quantity
}

// podAllocation reads the allocation of a pod's claim.
func podAllocation(t *testing.T, ctx context.Context, p *corev1.Pod) allocation {
	t.Helper()
	got := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.ResourceClaimStatuses) == 0 || got.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
		t.Fatalf("pod %s has no claim", p.Name)
	}
	c := &resourceapi.ResourceClaim{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: *got.Status.ResourceClaimStatuses[0].ResourceClaimName}, c); err != nil {
		t.Fatal(err)
	}
	if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 {
		t.Fatalf("claim %s is not allocated one device: %+v", c.Name, c.Status.Allocation)
	}
	r := c.Status.Allocation.Devices.Results[0]
	return allocation{pool: r.Pool, device: r.Device, consumed: r.ConsumedCapacity[dra.CapacityMemory]}
}

func host(name string) map[string]string { return map[string]string{"kubernetes.io/hostname": name} }

func TestDRAShareGoesWhereOneGPUHasRoom(t *testing.T) {
	ctx := context.Background()
	ns := draNamespace(t, ctx, "dra-fit")
	draNode(t, ctx, "dra-fit-x", "fit", fakeGPUs(2), 2)
	draNode(t, ctx, "dra-fit-y", "later", fakeGPUs(1), 1)
	for i, node := range []string{"dra-fit-x", "dra-fit-x", "dra-fit-y"} {
		gib := []int64{34, 34, 30}[i]
		p := claimPod(t, ctx, ns, fmt.Sprintf("filler-%d", i), dra.ClassShare, gib, host(node))
		waitState(t, ctx, p, "node "+node)
	}
	// x has 6 + 6 GiB free on two GPUs: 12 GiB in all, but not 10 on one.
	p := claimPod(t, ctx, ns, "ten", dra.ClassShare, 10, map[string]string{draLabel: "fit"})
	waitState(t, ctx, p, "unschedulable")
	y := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "dra-fit-y"}, y); err != nil {
		t.Fatal(err)
	}
	y.Labels[draLabel] = "fit"
	if err := env.Client.Update(ctx, y); err != nil {
		t.Fatal(err)
	}
	waitState(t, ctx, p, "node dra-fit-y") // 10 GiB free on its one GPU
	if got := podAllocation(t, ctx, p); got.device != "gpu-0" || got.consumed.Cmp(resource.MustParse("10Gi")) != 0 {
		t.Errorf("allocated %+v, want 10Gi of gpu-0", got)
	}
}

func TestDRAConcurrentSharesNeverOvercommit(t *testing.T) {
	ctx := context.Background()
	ns := draNamespace(t, ctx, "dra-load")
	nodes := []string{"dra-load-0", "dra-load-1", "dra-load-2"}
	for _, n := range nodes {
		draNode(t, ctx, n, "load", fakeGPUs(2), 2)
	}
	sizes := []int64{1, 2, 3, 5, 8} // 100 pods ask 380 GiB of 240
	pods := make([]*corev1.Pod, 100)
	var wg sync.WaitGroup
	for i := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			pods[i], err = createClaimPod(ctx, ns, fmt.Sprintf("share-%d", i), dra.ClassShare, sizes[i%len(sizes)], map[string]string{draLabel: "load"})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	bound := 0
	waitFor(t, "every pod bound or unschedulable", 180*time.Second, func() (bool, string) {
		bound = 0
		for _, p := range pods {
			switch s := podState(ctx, p); s {
			case "":
				return false, p.Name + " undecided"
			case "unschedulable":
			default:
				bound++
			}
		}
		return true, ""
	})
	used := map[string]int64{}
	for _, p := range pods {
		if podState(ctx, p) != "unschedulable" {
			a := podAllocation(t, ctx, p)
			used[a.pool+"/"+a.device] += a.consumed.Value()
		}
	}
	for dev, b := range used {
		if b > 40960<<20 {
			t.Errorf("%s holds %d MiB of claims, more than its 40960 MiB", dev, b>>20)
		}
	}
	if bound < 50 || len(used) != 6 {
		t.Errorf("%d pods bound on %d GPUs; want most of 240 GiB used on all 6", bound, len(used))
	}
}

func TestDRAWholeGPUIsExclusive(t *testing.T) {
	ctx := context.Background()
	ns := draNamespace(t, ctx, "dra-whole")
	draNode(t, ctx, "dra-whole-0", "whole", fakeGPUs(1), 1)
	sel := map[string]string{draLabel: "whole"}
	whole := claimPod(t, ctx, ns, "whole", dra.ClassGPU, 0, sel)
	waitState(t, ctx, whole, "node dra-whole-0")
	if got := podAllocation(t, ctx, whole); got.consumed.Cmp(resource.MustParse("40Gi")) != 0 {
		t.Errorf("a whole GPU consumed %s, want all 40Gi", got.consumed.String())
	}
	share := claimPod(t, ctx, ns, "share", dra.ClassShare, 1, sel)
	waitState(t, ctx, share, "unschedulable")
}

func TestDRAMIGInstanceByClass(t *testing.T) {
	ctx := context.Background()
	ns := draNamespace(t, ctx, "dra-mig")
	// GPU 0: MIG with a 3g.20gb and a 1g.5gb instance; GPU 1 whole.
	draNode(t, ctx, "dra-mig-0", "mig", fakeGPUs(2, nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE), 3)
	p := claimPod(t, ctx, ns, "mig", dra.MIGClass("3g.20gb"), 0, map[string]string{draLabel: "mig"})
	waitState(t, ctx, p, "node dra-mig-0")
	got := podAllocation(t, ctx, p)
	var attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
	for _, d := range nodeDevices(ctx, "dra-mig-0") {
		if d.Name == got.device {
			attrs = d.Attributes
		}
	}
	if v := attrs[dra.AttrProfile].StringValue; v == nil || *v != "3g.20gb" {
		t.Errorf("allocated %s with attributes %v, want a 3g.20gb instance", got.device, attrs)
	}
	second := claimPod(t, ctx, ns, "mig-2", dra.MIGClass("3g.20gb"), 0, map[string]string{draLabel: "mig"})
	waitState(t, ctx, second, "unschedulable") // the only 3g.20gb is taken
}
