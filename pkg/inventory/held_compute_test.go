package inventory

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// TestFitsNodeNeedsGPUAndComputeOnOneNode: a pod runs on one node, so the
// GPU it asks must be free on a node that also has its CPU and memory free.
func TestFitsNodeNeedsGPUAndComputeOnOneNode(t *testing.T) {
	gpu := map[string]int64{"nvidia.com/gpu": 1}
	cpu4 := map[string]int64{ResourceCPU: 4000, ResourceMemory: 16 << 30}
	node := func(name string) Node {
		return Node{Name: name, Allocatable: map[string]int64{"nvidia.com/gpu": 8},
			Compute: map[string]int64{ResourceCPU: 96000, ResourceMemory: 1 << 40}}
	}
	gpusFull := map[string]int64{"nvidia.com/gpu": 8}
	cpuFull := map[string]int64{"nvidia.com/gpu": 2, ResourceCPU: 94000}
	tests := map[string]struct {
		nodes   []Node
		byNode  map[string]map[string]int64
		compute map[string]int64
		want    bool
	}{
		"free GPUs on a node with no CPU left, the other node's GPUs all held": {
			nodes: []Node{node("a"), node("b")}, byNode: map[string]map[string]int64{"a": cpuFull, "b": gpusFull}, compute: cpu4, want: false},
		"free GPUs and CPU on one node": {
			nodes: []Node{node("a"), node("b")}, byNode: map[string]map[string]int64{"a": cpuFull}, compute: cpu4, want: true},
		"memory held, not CPU": {
			nodes: []Node{node("a")}, byNode: map[string]map[string]int64{"a": {ResourceMemory: 1<<40 - 1<<30}}, compute: cpu4, want: false},
		"a pod that asks no CPU or memory": {
			nodes: []Node{node("a"), node("b")}, byNode: map[string]map[string]int64{"a": cpuFull, "b": gpusFull}, want: true},
		"a node that states no CPU or memory is not checked for them": {
			nodes: []Node{{Name: "a", Allocatable: map[string]int64{"nvidia.com/gpu": 8}}}, byNode: map[string]map[string]int64{"a": cpuFull}, compute: cpu4, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := Held{ByNode: tc.byNode}
			if got := h.FitsNode(tc.nodes, gpu, tc.compute); got != tc.want {
				t.Errorf("FitsNode = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestBuildReadsNodesCompute: a pool's node keeps its allocatable CPU in
// millicores and memory in bytes, and nothing where the node states neither.
func TestBuildReadsNodesCompute(t *testing.T) {
	mk := func(name string, al corev1.ResourceList) corev1.Node {
		al["nvidia.com/gpu"] = resource.MustParse("8")
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8", "nvidia.com/gpu.memory": "81559"}},
			Status: corev1.NodeStatus{Allocatable: al}}
	}
	inv := Build([]corev1.Node{
		mk("a", corev1.ResourceList{"cpu": resource.MustParse("95500m"), "memory": resource.MustParse("1Ti")}),
		mk("b", corev1.ResourceList{}),
	}, allocator.Default())
	got := map[string]map[string]int64{}
	for _, p := range inv.Pools {
		for _, n := range p.Nodes {
			got[n.Name] = n.Compute
		}
	}
	if c := got["a"]; c[ResourceCPU] != 95500 || c[ResourceMemory] != 1<<40 {
		t.Errorf("node a's compute = %v, want cpu 95500 millicores and memory %d bytes", c, int64(1<<40))
	}
	if c, ok := got["b"]; !ok || c != nil {
		t.Errorf("node b's compute = %v (in inventory: %v), want nil", c, ok)
	}
}
