package allocator

import (
	"math/rand/v2"
	"testing"
)

// TestKindSetMatchesFragmentation: grouping kinds by GPU shape gives
// Fragmentation's number to the last bit, on random nodes and workloads
// mixing shares, whole GPUs, CPU-only kinds, model specs and memory.
func TestKindSetMatchesFragmentation(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	models := []string{"", "A100", "V100M16", "T4"}
	specs := []string{"", "A100", "V100M16|V100M32", "T4|A100"}
	for trial := range 200 {
		var tasks []FragTask
		for range 1 + r.IntN(40) {
			t := FragTask{MilliCPU: int64(r.IntN(8)) * 1000, MemoryMiB: int64(r.IntN(4)) * 4096, Weight: r.Float64(), Spec: specs[r.IntN(len(specs))]}
			switch r.IntN(3) {
			case 0: // CPU only
			case 1:
				t.GPUs, t.GPUMilli = 1, int64(1+r.IntN(999))
			default:
				t.GPUs, t.GPUMilli = 1+r.IntN(4), MilliPerGPU
			}
			tasks = append(tasks, t)
		}
		s := newKindSet(tasks)
		for range 20 {
			n := FragNode{MilliCPULeft: int64(r.IntN(10)) * 1000, MemoryMiBLeft: int64(r.IntN(5)) * 4096, Model: models[r.IntN(len(models))]}
			for range r.IntN(9) {
				n.GPUMilliLeft = append(n.GPUMilliLeft, []int64{0, 1000, int64(r.IntN(1001))}[r.IntN(3)])
			}
			if got, want := s.fragmentation(n), Fragmentation(n, tasks); got != want {
				t.Fatalf("trial %d, node %+v: kindSet %v, Fragmentation %v", trial, n, got, want)
			}
		}
	}
}

// BenchmarkKindSetFragmentation is one node's fragmentation over a
// workload of 126 kinds in 24 GPU shapes (the openb default trace's GPU
// kinds number 126, its shapes 24), on 8-GPU nodes in random states.
func BenchmarkKindSetFragmentation(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	shapes := make([]FragTask, 24)
	for i := range shapes {
		if i < 20 {
			shapes[i] = FragTask{GPUs: 1, GPUMilli: int64(50 * (i + 1))}
		} else {
			shapes[i] = FragTask{GPUs: 1 << (i - 20), GPUMilli: MilliPerGPU}
		}
	}
	var tasks []FragTask
	for i := range 126 {
		t := shapes[i%len(shapes)]
		t.MilliCPU, t.MemoryMiB, t.Weight = int64(1+r.IntN(32))*1000, int64(r.IntN(64))*1024, r.Float64()
		tasks = append(tasks, t)
	}
	s := newKindSet(tasks)
	nodes := make([]FragNode, 256)
	for i := range nodes {
		nodes[i] = FragNode{MilliCPULeft: int64(r.IntN(96)) * 1000, MemoryMiBLeft: int64(r.IntN(512)) * 1024}
		for range 8 {
			nodes[i].GPUMilliLeft = append(nodes[i].GPUMilliLeft, []int64{0, 1000, int64(r.IntN(1001))}[r.IntN(3)])
		}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.fragmentation(nodes[i%len(nodes)])
	}
}
