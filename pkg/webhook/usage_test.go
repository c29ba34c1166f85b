package webhook

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
	"github.com/gpuadmit/gpuadmit/pkg/quota"
	"github.com/gpuadmit/gpuadmit/pkg/usage"
)

// TestUsageSourceReadsTheCache: the input is what the cache holds — nodes,
// gpuadmit's pods, only the ResourceQuotas named gpuadmit, and on DRA the
// GPUs the slices publish with what the claims hold of them.
func TestUsageSourceReadsTheCache(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mib := func(v int64) resource.Quantity { return *resource.NewQuantity(v, resource.DecimalSI) }
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{inventory.LabelProduct: "Tesla-T4"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{inventory.ResourceGPU: mib(1),
			inventory.ResourceMemoryMiB: mib(15360), corev1.ResourceName(inventory.ModelResource("T4")): mib(15360)}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "a"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	ours := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: quota.Name, Namespace: "a"}}
	theirs := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "a"}}
	slice := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "n1-gpu"}, Spec: resourceapi.ResourceSliceSpec{
		Driver: allocator.DRADriver, NodeName: ptr.To("n1"), Pool: resourceapi.ResourcePool{Name: "n1", ResourceSliceCount: 1},
		Devices: []resourceapi.Device{{Name: "gpu-0",
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{allocator.DRAAttrUUID: {StringValue: ptr.To("GPU-1")}},
			Capacity:   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{allocator.DRACapacityMemory: {Value: resource.MustParse("15Gi")}}}},
	}}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "a"}, Status: resourceapi.ResourceClaimStatus{
		Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: allocator.DRADriver, Pool: "n1", Device: "gpu-0",
			ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{allocator.DRACapacityMemory: resource.MustParse("4Gi")},
		}}}},
	}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(node, pod, ours, theirs, slice, claim).Build()
	src := &usageSource{cache: c, live: inventory.NewLive(c, allocator.Default(), logr.Discard()), engine: policy.NewEngine(policy.Options{}), dra: true}
	in, err := src.Input(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Nodes) != 1 || len(in.Pods) != 1 || in.Pods[0].Name != "p" || len(in.Inventory.Pools) != 1 {
		t.Errorf("nodes %d, pods %d, pools %d: want the cache's one of each", len(in.Nodes), len(in.Pods), len(in.Inventory.Pools))
	}
	if len(in.Quotas) != 1 || in.Quotas[0].Name != quota.Name {
		t.Errorf("quotas %v, want only %s", names(in.Quotas), quota.Name)
	}
	want := map[string][]usage.GPU{"n1": {{UUID: "GPU-1", CapacityMiB: 15360, AllocatedMiB: 4096}}}
	if diff := cmp.Diff(want, in.GPUs); diff != "" {
		t.Errorf("GPUs (-want +got):\n%s", diff)
	}
}

func names(rqs []corev1.ResourceQuota) []string {
	var out []string
	for _, rq := range rqs {
		out = append(out, client.ObjectKeyFromObject(&rq).String())
	}
	return out
}

// TestUsageExportFollowsRuns: the registry's one collector exports the
// collectors of the Runs that last, each only while it leads, and none of
// a Run that ended.
func TestUsageExportFollowsRuns(t *testing.T) {
	u := &usageExport{cs: map[*usage.Collector]bool{}}
	col := usage.NewCollector(emptySource{}, usage.CollectorOptions{}, logr.Discard())
	u.add(col)
	if n := testutil.CollectAndCount(u); n != 0 {
		t.Errorf("before its Run leads: %d series, want none", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	go func() { close(started); _ = col.Start(ctx) }()
	<-started
	for deadline := time.Now().Add(5 * time.Second); testutil.CollectAndCount(u, "gpuadmit_usage_up") == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the leading Run's collector exports nothing")
		}
	}
	u.remove(col)
	if n := testutil.CollectAndCount(u); n != 0 {
		t.Errorf("after its Run ended: %d series, want none", n)
	}
}

type emptySource struct{}

func (emptySource) Input(context.Context) (usage.Input, error) { return usage.Input{}, nil }
