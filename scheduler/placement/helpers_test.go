package placement_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	resourceslicetracker "k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
	"k8s.io/utils/ptr"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/scheduler/placement"
)

const profile = "gpuadmit-scheduler"

// env is a real scheduling framework with GPUAdmit as its only PreFilter,
// Filter, PreScore and Score plugin, on informers of a fake clientset
// (holding objs) and the scheduler's own DRA manager over them, scheduling
// on the snapshot of the scheduler's own cache, which holds nodes and the
// pods bound to them.
type env struct {
	ctx      context.Context
	fw       framework.Framework
	client   *fake.Clientset
	cache    internalcache.Cache
	snapshot *internalcache.Snapshot
}

// update brings the snapshot up to the cache, as the scheduler does at the
// start of every cycle: only the NodeInfos that changed are copied, each
// with the generation the cache gave it.
func (e *env) update(t testing.TB) {
	t.Helper()
	if err := e.cache.UpdateSnapshot(klog.FromContext(e.ctx), e.snapshot); err != nil {
		t.Fatal(err)
	}
}

// cluster is the nodes and the pods bound to them (spec.nodeName set).
type cluster struct {
	nodes []*corev1.Node
	pods  []*corev1.Pod
}

// add puts n and pods, bound to it, in the cluster.
func (c *cluster) add(n *corev1.Node, pods ...*corev1.Pod) {
	c.nodes = append(c.nodes, n)
	for _, p := range pods {
		p.Spec.NodeName = n.Name
		c.pods = append(c.pods, p)
	}
}

// newEnv starts the framework; args is the plugin's args as JSON ("" for none).
func newEnv(t testing.TB, args string, c cluster, objs ...runtime.Object) *env {
	t.Helper()
	return newEnvWith(t, args, c, nil, objs...)
}

// newEnvWith is newEnv with more framework options.
func newEnvWith(t testing.TB, args string, c cluster, opts []frameworkruntime.Option, objs ...runtime.Object) *env {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	objs = append([]runtime.Object(nil), objs...)
	for _, n := range c.nodes { // the Node informer's, as in a cluster
		objs = append(objs, n)
	}
	client := fake.NewClientset(objs...)
	f := informers.NewSharedInformerFactory(client, 0)
	slices, err := resourceslicetracker.StartTracker(ctx, resourceslicetracker.Options{
		SliceInformer: f.Resource().V1().ResourceSlices(), KubeClient: client})
	if err != nil {
		t.Fatal(err)
	}
	claims := assumecache.NewAssumeCache(klog.FromContext(ctx), f.Resource().V1().ResourceClaims().Informer(), "resource claim", "", nil)
	synced := claims.AddEventHandler(cache.ResourceEventHandlerFuncs{})
	dra := dynamicresources.NewDRAManager(ctx, claims, slices, f)
	sc := internalcache.New(ctx, nil, false, false)
	for _, n := range c.nodes {
		sc.AddNode(klog.FromContext(ctx), n)
	}
	for _, p := range c.pods {
		if err := sc.AddPod(klog.FromContext(ctx), p); err != nil {
			t.Fatal(err)
		}
	}
	snapshot := internalcache.NewEmptySnapshot()
	if err := sc.UpdateSnapshot(klog.FromContext(ctx), snapshot); err != nil {
		t.Fatal(err)
	}
	factory := func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		var obj runtime.Object
		if args != "" {
			obj = &runtime.Unknown{Raw: []byte(args), ContentType: runtime.ContentTypeJSON}
		}
		return placement.New(ctx, obj, h)
	}
	fw, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
		tf.RegisterPluginAsExtensions(placement.Name, factory, "PreFilter", "Filter", "PreScore", "Score"),
	}, profile, append([]frameworkruntime.Option{frameworkruntime.WithClientSet(client), frameworkruntime.WithInformerFactory(f),
		frameworkruntime.WithSharedDRAManager(dra), frameworkruntime.WithSnapshotSharedLister(snapshot)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), synced.HasSynced) // the claim tracker has seen the informer's list
	t.Cleanup(func() { cancel(); f.Shutdown() })
	return &env{ctx: ctx, fw: fw, client: client, cache: sc, snapshot: snapshot}
}

// scores runs PreFilter, Filter, PreScore and Score for pod on every node
// and returns the total score of each node that passed Filter, and the
// statuses of those that did not.
func (e *env) scores(t testing.TB, pod *corev1.Pod) (map[string]int64, map[string]*fwk.Status) {
	t.Helper()
	return e.scoresIn(t, pod, nil)
}

// scoresIn is scores with the feasible nodes given to PreScore and Score
// in the order order puts them in (nil: the snapshot's).
func (e *env) scoresIn(t testing.TB, pod *corev1.Pod, order func([]fwk.NodeInfo)) (map[string]int64, map[string]*fwk.Status) {
	t.Helper()
	nodes, err := e.snapshot.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	state := framework.NewCycleState()
	if _, st, _ := e.fw.RunPreFilterPlugins(e.ctx, state, pod); !st.IsSuccess() && !st.IsSkip() {
		t.Fatalf("PreFilter: %v", st)
	}
	refused := map[string]*fwk.Status{}
	var feasible []fwk.NodeInfo
	for _, n := range nodes {
		if st := e.fw.RunFilterPlugins(e.ctx, state, pod, n); !st.IsSuccess() {
			refused[n.Node().Name] = st
			continue
		}
		feasible = append(feasible, n)
	}
	if order != nil {
		order(feasible)
	}
	if st := e.fw.RunPreScorePlugins(e.ctx, state, pod, feasible); !st.IsSuccess() {
		t.Fatalf("PreScore: %v", st)
	}
	out := map[string]int64{}
	list, st := e.fw.RunScorePlugins(e.ctx, state, pod, feasible)
	if !st.IsSuccess() {
		t.Fatalf("Score: %v", st)
	}
	for _, s := range list {
		out[s.Name] = s.TotalScore
	}
	return out, refused
}

// node is a kwok-like node with 64 CPUs and 256 GiB.
func node(name string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}}
	n.Status.Allocatable = corev1.ResourceList{"cpu": resource.MustParse("64"), "memory": resource.MustParse("256Gi"), "pods": resource.MustParse("110")}
	return n
}

// dpNode is a device-plugin node with gpus healthy A100 40GB GPUs, each
// offering 4 shares of 10 GiB, as the agent publishes it.
func dpNode(name string, gpus int) *corev1.Node {
	n := node(name)
	var list []allocator.NodeGPU
	for i := range gpus {
		list = append(list, allocator.NodeGPU{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", name, i), Product: "NVIDIA A100-SXM4-40GB",
			Model: "A100-40GB", Known: true, MemoryMiB: 40960, MIGMode: allocator.MIGDisabled, Healthy: true})
	}
	g, _ := json.Marshal(list)
	s, _ := json.Marshal(allocator.ShareOffer{Resource: allocator.ResourceShare, UnitMiB: 10240, SharesPerGPU: 4})
	n.Annotations[allocator.AnnotationGPUs], n.Annotations[allocator.AnnotationShare] = string(g), string(s)
	n.Status.Allocatable[allocator.ResourceShare] = *resource.NewQuantity(int64(4*gpus), resource.DecimalSI)
	return n
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// sharePod asks units of gpuadmit.io/gpu-mem per container, one CPU and
// 1 GiB; age orders pods created before it.
func sharePod(name string, age int, units ...int64) *corev1.Pod {
	p := pod(name)
	p.CreationTimestamp = metav1.NewTime(epoch.Add(time.Duration(age) * time.Second))
	p.Spec.Containers = nil
	for i, u := range units {
		c := corev1.Container{Name: fmt.Sprintf("c%d", i), Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			allocator.ResourceShare: *resource.NewQuantity(u, resource.DecimalSI)}}}
		if i == 0 {
			c.Resources.Requests["cpu"], c.Resources.Requests["memory"] = resource.MustParse("1"), resource.MustParse("1Gi")
		}
		p.Spec.Containers = append(p.Spec.Containers, c)
	}
	return p
}

func pod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name)},
		Spec: corev1.PodSpec{SchedulerName: profile, Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"cpu": resource.MustParse("1"), "memory": resource.MustParse("1Gi")}}}}},
	}
}

const gib = int64(1) << 30

// draSlice is the ResourceSlice gpuadmit's DRA agent publishes for a node
// with gpus A100 40GB GPUs, each shared in steps of 1 GiB.
func draSlice(nodeName string, gpus int) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: nodeName + "-gpu.gpuadmit.io"}}
	s.Spec.Driver, s.Spec.NodeName = allocator.DRADriver, ptr.To(nodeName)
	s.Spec.Pool = resourceapi.ResourcePool{Name: nodeName, Generation: 1, ResourceSliceCount: 1}
	for i := range gpus {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{
			Name:                     fmt.Sprintf("gpu-%d", i),
			AllowMultipleAllocations: ptr.To(true),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				allocator.DRAAttrType: {StringValue: ptr.To(allocator.DRATypeGPU)}},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{allocator.DRACapacityMemory: {
				Value: *resource.NewQuantity(40*gib, resource.BinarySI),
				RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: resource.NewQuantity(40*gib, resource.BinarySI),
					ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: resource.NewQuantity(gib, resource.BinarySI), Step: resource.NewQuantity(gib, resource.BinarySI)}},
			}},
		})
	}
	return s
}

// heldClaim is an allocated claim holding gibs GiB of device on nodeName.
func heldClaim(name, nodeName, device string, gibs int64) *resourceapi.ResourceClaim {
	c := shareClaim(name, gibs)
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
		Request: "gpu", Driver: allocator.DRADriver, Pool: nodeName, Device: device, ShareID: ptr.To(types.UID(name)),
		ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{allocator.DRACapacityMemory: *resource.NewQuantity(gibs*gib, resource.BinarySI)},
	}}}}
	return c
}

// shareClaim asks gibs GiB of one GPU, as gpuadmit's claim templates do.
func shareClaim(name string, gibs int64) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name)}}
	c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: allocator.DRAClassShare, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
		Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
			allocator.DRACapacityMemory: *resource.NewQuantity(gibs*gib, resource.BinarySI)}}}}}
	return c
}

// claimPod is a pod using claim.
func claimPod(name, claim string) *corev1.Pod {
	p := pod(name)
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim)}}
	return p
}

// draCluster is n DRA nodes of gpus GPUs each, node i named name(i) and
// running claims(i) pods, pod j with a claim that holds gibs GiB of GPU
// device; it returns the cluster and the slices and claims behind it.
func draCluster(n, gpus int, name func(i int) string, claims func(i int) int, hold func(i, j int) (device int, gibs int64)) (cluster, []runtime.Object) {
	var c cluster
	var objs []runtime.Object
	for i := range n {
		nn := name(i)
		objs = append(objs, draSlice(nn, gpus))
		var pods []*corev1.Pod
		for j := range claims(i) {
			claim := fmt.Sprintf("%s-c%d", nn, j)
			device, gibs := hold(i, j)
			objs = append(objs, heldClaim(claim, nn, fmt.Sprintf("gpu-%d", device), gibs))
			pods = append(pods, claimPod(claim, claim))
		}
		c.add(node(nn), pods...)
	}
	return c, objs
}
