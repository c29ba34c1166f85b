package usage_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/usage"
)

// BenchmarkCompute50kPods is one scrape's report at the scale the series
// budget is stated for: 5,000 nodes of 8 GPUs known one by one, 50,000
// GPU pods bound in 1,000 namespaces, 1,000 of them pending, and the
// default policy data's three typical sizes.
func BenchmarkCompute50kPods(b *testing.B) {
	var nodes []corev1.Node
	gpus := map[string][]usage.GPU{}
	for i := range 5000 {
		name := fmt.Sprintf("n%04d", i)
		nodes = append(nodes, t4Node(name, 8, "128"))
		for g := range 8 {
			gpus[name] = append(gpus[name], usage.GPU{UUID: fmt.Sprintf("GPU-%d-%d", i, g), CapacityMiB: t4MiB, AllocatedMiB: int64(g%3) * 4096})
		}
	}
	var pods []*corev1.Pod
	for i := range 50000 {
		node := fmt.Sprintf("n%04d", i%5000)
		if i%50 == 0 {
			node = ""
		}
		pods = append(pods, pod(fmt.Sprintf("ns%03d", i%1000), fmt.Sprintf("p%d", i), node, int64(1+i%4)*2048, 0, "1"))
	}
	in := usage.Input{Inventory: inventory.Build(nodes, allocator.Default()), Nodes: nodes, Pods: pods, GPUs: gpus,
		Config: usage.Config{Sizes: []usage.Size{{GPUMemoryMiB: 8192, GPUs: 1, MilliCPU: 2000}, {GPUMemoryMiB: 20480, GPUs: 1}, {GPUMemoryMiB: 40960, GPUs: 1}}}}
	b.ResetTimer()
	for range b.N {
		r := usage.Compute(in)
		usage.Fold(&r, usage.DefaultMaxNamespaces)
	}
}
