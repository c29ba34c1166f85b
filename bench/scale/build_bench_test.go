package scale

import (
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// BenchmarkBuildFleet5000 is one inventory build over the benchmark's
// 5,000-node fleet (1,000 of them DRA nodes with their slices): what each
// background rebuild at the largest step costs, without the cache's list.
func BenchmarkBuildFleet5000(b *testing.B) {
	root, err := filepath.Abs("../..")
	if err != nil {
		b.Fatal(err)
	}
	f, err := fleet(root, 5000, 5)
	if err != nil {
		b.Fatal(err)
	}
	var nodes []corev1.Node
	var rs []resourceapi.ResourceSlice
	for _, g := range f {
		nodes = append(nodes, g.node)
		rs = append(rs, g.slices...)
	}
	cat := allocator.Default()
	b.ResetTimer()
	for b.Loop() {
		inventory.BuildWithSlices(nodes, rs, cat)
	}
}
