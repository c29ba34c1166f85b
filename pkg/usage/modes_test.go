package usage_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/usage"
)

// gfdNode is a node as GPU Feature Discovery and a device plugin label it:
// labels, and allocatable GPU resources besides 64 CPUs and 512 GiB.
func gfdNode(name string, labels map[string]string, gpu map[string]int64) corev1.Node {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi")}
	for r, q := range gpu {
		alloc[corev1.ResourceName(r)] = *resource.NewQuantity(q, resource.DecimalSI)
	}
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Status: corev1.NodeStatus{Allocatable: alloc}}
}

// boundPod holds the GPU resources res on node, with no accounting
// request, so its memory is read from the resources at the pool's sizes.
func boundPod(name, node string, res map[string]int64) *corev1.Pod {
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	for r, q := range res {
		req[corev1.ResourceName(r)] = *resource.NewQuantity(q, resource.DecimalSI)
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: req}}}}}
}

// A pool's GPUs are physical GPUs and one GPU's memory is a whole GPU's in
// every mode, so the GPU figures (MiB over GPUMemoryMiB) are GPUs: not MIG
// devices, under the single strategy, where GFD counts MIG devices in
// nvidia.com/gpu.count, nor time-slicing replicas.
func TestGPUsArePhysicalInEveryMode(t *testing.T) {
	tests := map[string]struct {
		node corev1.Node
		pod  *corev1.Pod
		pool string
		want usage.Pool
	}{
		// examples/nodes.yaml's a100-single-0: 8 A100s of 7 1g.5gb each.
		"mig-single: 56 MIG devices are 8 GPUs": {
			node: gfdNode("n1", map[string]string{inventory.LabelProduct: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
				inventory.LabelCount: "56", inventory.LabelMemory: "4864", inventory.LabelMIGStrategy: "single"},
				map[string]int64{inventory.ResourceGPU: 56}),
			pod:  boundPod("p", "n1", map[string]int64{inventory.ResourceGPU: 2}),
			pool: "a100-40gb-mig-1g.5gb",
			want: usage.Pool{GPUs: 8, GPUMemoryMiB: 40960, CapacityMiB: 56 * 4864, FreeMiB: 54 * 4864,
				Allocated: map[usage.Holder]int64{{Namespace: "a", Form: usage.FormMIG}: 2 * 4864}},
		},
		"mig-single without GFD's count: its allocatable devices": {
			node: gfdNode("n1", map[string]string{inventory.LabelProduct: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", inventory.LabelMIGStrategy: "single"},
				map[string]int64{inventory.ResourceGPU: 14}),
			pool: "a100-40gb-mig-1g.5gb",
			want: usage.Pool{GPUs: 2, GPUMemoryMiB: 40960, CapacityMiB: 14 * 4864, FreeMiB: 14 * 4864},
		},
		// GFD labels a time-sliced node with its physical count and the replicas.
		"time-sliced: 8 replicas of 2 GPUs are 2 GPUs, a replica a quarter of one": {
			node: gfdNode("n1", map[string]string{inventory.LabelProduct: "Tesla-T4-SHARED", inventory.LabelCount: "2", inventory.LabelReplicas: "4"},
				map[string]int64{inventory.ResourceGPU: 8}),
			pod:  boundPod("p", "n1", map[string]int64{inventory.ResourceGPU: 1}),
			pool: "t4-time-sliced",
			want: usage.Pool{GPUs: 2, GPUMemoryMiB: t4MiB, CapacityMiB: 2 * t4MiB, FreeMiB: 2*t4MiB - t4MiB/4,
				Allocated: map[usage.Holder]int64{{Namespace: "a", Form: usage.FormTime}: t4MiB / 4}},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			nodes := []corev1.Node{tt.node}
			in := usage.Input{Inventory: inventory.Build(nodes, allocator.Default()), Nodes: nodes}
			if tt.pod != nil {
				in.Pods = append(in.Pods, tt.pod)
			}
			got := poolOf(t, usage.Compute(in), tt.pool)
			// Stranded and fragmentation have their own tests; here, what the GPU figures count.
			got.Name, got.Model, got.Mode, got.StrandedMiB, got.FragmentationMiB, got.Pending = "", "", "", 0, 0, nil
			if tt.want.Allocated == nil {
				tt.want.Allocated = map[usage.Holder]int64{}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("pool (-want +got):\n%s", diff)
			}
		})
	}
}
