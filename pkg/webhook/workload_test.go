package webhook

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// pickFixture is a Mutator over smallCluster whose free capacity and
// workload come from the cached pods, picking pools as pick says.
func pickFixture(t *testing.T, pick PoolPick, cached ...*corev1.Pod) (*mutate.Mutator, *capacity, *inventory.Inventory) {
	t.Helper()
	capa := newCapacity(nil, logr.Discard())
	for _, p := range cached {
		capa.Handler().OnAdd(p, true)
	}
	engine := policy.NewEngine(policy.Options{})
	if _, err := engine.Load(context.Background(), policy.Embedded()); err != nil {
		t.Fatal(err)
	}
	inv := smallCluster(t, 7)
	m := mutate.NewMutator(engine, mutate.StaticInventory{Inv: inv}, mutate.MutatorOptions{Capacity: capa, Demand: demand(pick, capa)})
	return m, capa, inv
}

// onH100 is a pod gpuadmit placed on the MIG pool, holding one slice on
// node, that accepts the models listed (comma-separated).
func onH100(t *testing.T, name, accepted string) *corev1.Pod {
	t.Helper()
	p := holding(name, node, "", corev1.PodRunning)
	inv := smallCluster(t, 7)
	pool, ok := inv.Pool(migPool)
	if !ok {
		t.Fatalf("no pool %s", migPool)
	}
	one := corev1.ResourceList{slice: resource.MustParse("1"), inventory.ResourceMemoryMiB: resource.MustParse("9984"),
		corev1.ResourceName(inventory.ModelResource(pool.Model)): resource.MustParse("9984")}
	p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: one, Requests: one}
	p.Annotations[record.AnnotationAcceptedModels] = accepted
	return p
}

// models is the accepted-models value of the models of smallCluster's pools.
func models(t *testing.T, pools ...string) string {
	t.Helper()
	inv := smallCluster(t, 7)
	var out []string
	for _, name := range pools {
		p, ok := inv.Pool(name)
		if !ok {
			t.Fatalf("no pool %s", name)
		}
		out = append(out, p.Model)
	}
	return strings.Join(out, ",")
}

func admitPool(t *testing.T, m *mutate.Mutator) (string, mutate.Result) {
	t.Helper()
	res, err := m.Mutate(context.Background(), mutate.Request{Pod: asking("small")})
	if err != nil || !res.Allowed {
		t.Fatalf("Mutate: %v, allowed %v: %s", err, res.Allowed, res.Message)
	}
	return mutate.PoolOf(res.Pod), res
}

// TestPoolPickByExpectedDemand: a pod asking 3000 MiB may take an H100
// slice (the policy's first) or a T4 share, and both have room. Where the
// cached pods on the H100 accept the H100 only, the pod goes to the T4 and
// the explanation says why; where they accept either model, or the pick
// is --pool-pick=order, it keeps the policy's order, though the T4 has more
// free GPU than the H100's five slices left.
func TestPoolPickByExpectedDemand(t *testing.T) {
	both := models(t, migPool, sharePool)
	h100 := models(t, migPool)
	tests := map[string]struct {
		pick     PoolPick
		accepted string
		want     string
	}{
		"pinned pods keep the H100 for themselves":    {pick: PickExpected, accepted: h100, want: sharePool},
		"pods that accept either model pin nothing":   {pick: PickExpected, accepted: both, want: migPool},
		"--pool-pick=order takes the first with room": {pick: PickOrder, accepted: h100, want: migPool},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m, _, _ := pickFixture(t, tc.pick, onH100(t, "a", tc.accepted), onH100(t, "b", tc.accepted))
			got, res := admitPool(t, m)
			if got != tc.want {
				t.Fatalf("pool %s, want %s; passed over: %v", got, tc.want, res.PassedOver)
			}
			if got == sharePool && !strings.Contains(strings.Join(res.PassedOver, "; "), "pool "+migPool+": has room, but is priced") {
				t.Errorf("passed over %v, want it to say pool %s was priced higher", res.PassedOver, migPool)
			}
		})
	}
}

// TestWorkloadFollowsTheCache: the pinned pods' need follows the informer's
// events: a pod that finishes or is deleted (a tombstone included) stops
// counting, and the pick goes back to the policy's order.
func TestWorkloadFollowsTheCache(t *testing.T) {
	h100 := models(t, migPool)
	a, b := onH100(t, "a", h100), onH100(t, "b", h100)
	m, capa, inv := pickFixture(t, PickExpected, a, b)
	model := func() string { p, _ := inv.Pool(migPool); return p.Model }()
	if capa.workload.Need(inv)[model] <= 0 {
		t.Fatalf("need %v with two pinned pods cached, want some on %s", capa.workload.Need(inv), model)
	}
	h := capa.Handler()
	done := a.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	h.OnUpdate(a, done)
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "team-a/b", Obj: b})
	if need := capa.workload.Need(inv); len(need) != 0 {
		t.Errorf("need %v after the pinned pods finished or went, want none", need)
	}
	if got, _ := admitPool(t, m); got != migPool {
		t.Errorf("pool %s after the pinned pods went, want the policy's first, %s", got, migPool)
	}
	h.OnAdd(b, false)
	if got, _ := admitPool(t, m); got != sharePool {
		t.Errorf("pool %s with a pinned pod cached again, want %s", got, sharePool)
	}
	h.OnDelete(b)
	if need := capa.workload.Need(inv); len(need) != 0 {
		t.Errorf("need %v after the last pinned pod was deleted, want none", need)
	}
}

// TestParsePoolPick: the flag's values, its default, and a wrong one named.
func TestParsePoolPick(t *testing.T) {
	for in, want := range map[string]PoolPick{"": PickExpected, "expected": PickExpected, "order": PickOrder} {
		if got, err := ParsePoolPick(in); err != nil || got != want {
			t.Errorf("ParsePoolPick(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParsePoolPick("most-free"); err == nil || !strings.Contains(err.Error(), `"most-free"`) {
		t.Errorf("ParsePoolPick(most-free): %v, want an error naming the value", err)
	}
}
