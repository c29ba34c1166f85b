package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

// TestPickLeavesAModelToPodsOnlyItServes: through the real API server and
// the webhook's pod cache, a pod that any model can serve goes to the
// policy's first pool; once pods that accept only that pool's model are
// cached, it goes to another model, and back when they are deleted.
func TestPickLeavesAModelToPodsOnlyItServes(t *testing.T) {
	ctx := context.Background()
	flexible := func() *corev1.Pod {
		return gpuPod("team-a", "flexible", map[string]string{"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"})
	}
	dryRun := func() (string, string) {
		p := flexible()
		if err := env.Client.Create(ctx, p, client.DryRunAll); err != nil {
			return "", err.Error()
		}
		return mutate.PoolOf(p), p.Annotations[record.AnnotationAcceptedModels]
	}
	first, accepted := dryRun()
	if first == "" {
		t.Fatalf("step dry run: the flexible pod got no pool (%s)", accepted)
	}
	model := modelOf(t, ctx, first)
	var pinned []*corev1.Pod
	for i := range 2 {
		p := gpuPod("team-a", fmt.Sprintf("pinned-%d", i), map[string]string{"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"})
		p.Annotations = map[string]string{"gpuadmit.io/model": model}
		if err := env.Client.Create(ctx, p, client.DryRunAll); err != nil || p.Annotations[record.AnnotationAcceptedModels] != model {
			t.Fatalf("step dry run %s: %v, accepted models %q, want %s only", p.Name, err, p.Annotations[record.AnnotationAcceptedModels], model)
		}
		p = gpuPod("team-a", p.Name, map[string]string{"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"})
		p.Annotations = map[string]string{"gpuadmit.io/model": model}
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatalf("step create %s: %v", p.Name, err)
		}
		defer deleteAll(ctx, "team-a", p)
		pinned = append(pinned, p)
	}
	var moved string
	waitFor(t, "the flexible pod leaves "+model+" to the pinned pods", 20*time.Second, func() (bool, string) {
		pool, _ := dryRun()
		moved = pool
		return pool != "" && modelOf(t, ctx, pool) != model, "pool " + pool
	})
	deleteAll(ctx, "team-a", pinned...)
	waitFor(t, "the flexible pod goes back to "+first, 30*time.Second, func() (bool, string) {
		pool, _ := dryRun()
		return pool == first, fmt.Sprintf("pool %s (it had moved to %s)", pool, moved)
	})
}

// modelOf is the GPU model of a pool, from the cluster's nodes as the
// inventory reads them.
func modelOf(t *testing.T, ctx context.Context, pool string) string {
	t.Helper()
	var nodes corev1.NodeList
	if err := env.Client.List(ctx, &nodes); err != nil {
		t.Fatalf("list nodes: %v", err)
	}
	p, ok := inventory.Build(nodes.Items, allocator.Default()).Pool(pool)
	if !ok {
		t.Fatalf("no pool %s on the cluster's nodes", pool)
	}
	return p.Model
}
