package inventory_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

func timeSlicedNodes(t testing.TB) []corev1.Node {
	t.Helper()
	return readNodes(t, "../../examples/nodes-time-sliced.yaml")
}

// TestBuildTimeSliced: GPUs NVIDIA's device plugin time-slices are their own
// pool mode, not whole GPUs: the model is the base product without -SHARED,
// the resource is the one the plugin serves (nvidia.com/gpu, or
// nvidia.com/gpu.shared when renamed), and a replica counts as its GPU's
// memory over the replicas.
func TestBuildTimeSliced(t *testing.T) {
	inv := inventory.Build(timeSlicedNodes(t), allocator.Default())
	want := map[string]poolView{
		"a10-time-sliced": {
			Model: "A10", Mode: inventory.TimeSliced, Resource: "nvidia.com/gpu.shared", GPUMemoryMiB: 23028,
			NodeSelector: map[string]string{inventory.LabelProduct: "NVIDIA-A10"},
			Allocatable:  acc(map[string]int64{"nvidia.com/gpu.shared": 4}, "a10", 46056), Nodes: []string{"a10-ts-0"},
		},
		"l4-time-sliced": {
			Model: "L4", Mode: inventory.TimeSliced, Resource: "nvidia.com/gpu", GPUMemoryMiB: 23034,
			NodeSelector: map[string]string{inventory.LabelProduct: "NVIDIA-L4-SHARED"},
			Allocatable:  acc(map[string]int64{"nvidia.com/gpu": 16}, "l4", 92136), Nodes: []string{"l4-ts-0"},
		},
		"l4-whole": {
			Model: "L4", Mode: inventory.Whole, Resource: "nvidia.com/gpu", GPUMemoryMiB: 23034,
			NodeSelector: map[string]string{inventory.LabelProduct: "NVIDIA-L4"},
			Allocatable:  acc(map[string]int64{"nvidia.com/gpu": 1}, "l4", 23034), Nodes: []string{"l4-whole-0"},
		},
	}
	if diff := cmp.Diff(want, view(inv)); diff != "" {
		t.Errorf("pools (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string(nil), inv.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	got := map[string][2]int64{}
	for _, p := range inv.Pools {
		got[p.Name] = [2]int64{p.ReplicasPerGPU, p.GPUsPerNode}
	}
	wantReplicas := map[string][2]int64{"a10-time-sliced": {2, 2}, "l4-time-sliced": {4, 4}, "l4-whole": {0, 1}}
	if diff := cmp.Diff(wantReplicas, got); diff != "" {
		t.Errorf("replicas per GPU and GPUs per node (-want +got):\n%s", diff)
	}
	l4, _ := inv.Pool("l4-time-sliced")
	if acc := l4.NodeAccounting(l4.Nodes[0]); acc[inventory.ResourceMemoryMiB] != 16*(23034/4) {
		t.Errorf("accounting of 16 L4 replicas = %d MiB, want %d (a quarter GPU each)", acc[inventory.ResourceMemoryMiB], 16*(23034/4))
	}
}

// TestTimeSlicingSigns: each sign GFD and the device plugin leave makes a
// node time-sliced, and replicas: 1 alone does not.
func TestTimeSlicingSigns(t *testing.T) {
	tests := map[string]struct {
		labels       map[string]string
		alloc        map[string]string
		wantMode     inventory.Mode
		wantReplicas int64
	}{
		"replicas label":           {labels: map[string]string{inventory.LabelProduct: "Tesla-T4", "nvidia.com/gpu.replicas": "3"}, alloc: map[string]string{"nvidia.com/gpu": "3"}, wantMode: inventory.TimeSliced, wantReplicas: 3},
		"-SHARED product alone":    {labels: map[string]string{inventory.LabelProduct: "Tesla-T4-SHARED", "nvidia.com/gpu.count": "2"}, alloc: map[string]string{"nvidia.com/gpu": "8"}, wantMode: inventory.TimeSliced, wantReplicas: 4},
		"renamed resource alone":   {labels: map[string]string{inventory.LabelProduct: "Tesla-T4"}, alloc: map[string]string{"nvidia.com/gpu.shared": "5"}, wantMode: inventory.TimeSliced, wantReplicas: 1},
		"one replica is whole":     {labels: map[string]string{inventory.LabelProduct: "Tesla-T4", "nvidia.com/gpu.replicas": "1"}, alloc: map[string]string{"nvidia.com/gpu": "1"}, wantMode: inventory.Whole},
		"no label at all is whole": {labels: map[string]string{inventory.LabelProduct: "Tesla-T4"}, alloc: map[string]string{"nvidia.com/gpu": "1"}, wantMode: inventory.Whole},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			inv := inventory.Build([]corev1.Node{node("n", tc.labels, tc.alloc)}, nil)
			if len(inv.Pools) != 1 {
				t.Fatalf("%d pools, want 1; warnings %q", len(inv.Pools), inv.Warnings)
			}
			p := inv.Pools[0]
			if p.Mode != tc.wantMode || p.ReplicasPerGPU != tc.wantReplicas || p.Model != "T4" {
				t.Errorf("mode %s, %d replicas, model %s; want %s, %d, T4", p.Mode, p.ReplicasPerGPU, p.Model, tc.wantMode, tc.wantReplicas)
			}
		})
	}
}
