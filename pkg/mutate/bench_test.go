package mutate

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// thousandNodes is a cluster of 1,000 GPU nodes in five pools of every mode.
func thousandNodes() []corev1.Node {
	kinds := []corev1.Node{h100Mixed, h200Mixed, a100Single, t4Shared, a100Whole}
	nodes := make([]corev1.Node, 0, 1000)
	for i := 0; i < 1000; i++ {
		n := *kinds[i%len(kinds)].DeepCopy()
		n.Name = fmt.Sprintf("%s-%04d", n.Name, i)
		nodes = append(nodes, n)
	}
	return nodes
}

// BenchmarkDecide1000Nodes is one admission decision (intent, Rego policy,
// pool choice, mutation, patch) with the default policies over an inventory
// of 1,000 nodes, as the webhook runs it with its informer-built inventory.
func BenchmarkDecide1000Nodes(b *testing.B) {
	m := NewMutator(defaultEngine, StaticInventory{Inv: inventory.Build(thousandNodes(), allocator.Default())})
	p := pod("p", map[string]string{"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"})
	p.Labels = map[string]string{"gpuadmit.io/class": "inference"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := m.Mutate(ctx, Request{Pod: p})
		if err != nil || !res.Allowed {
			b.Fatalf("allowed %v, err %v: %s", res.Allowed, err, res.Message)
		}
	}
}

// BenchmarkReinvoke1000Nodes is the same pod arriving already mutated
// (reinvocation): restore, decide again, compare.
func BenchmarkReinvoke1000Nodes(b *testing.B) {
	m := NewMutator(defaultEngine, StaticInventory{Inv: inventory.Build(thousandNodes(), allocator.Default())})
	first, err := m.Mutate(context.Background(), Request{Pod: pod("p", map[string]string{"nvidia.com/gpumem": "3000"})})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := m.Mutate(context.Background(), Request{Pod: first.Pod})
		if err != nil || !res.Allowed || len(res.Patch) != 0 {
			b.Fatalf("allowed %v, err %v, patch %v", res.Allowed, err, res.Patch)
		}
	}
}
