package mutate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

// TestMIGSingleStrategy: nvidia.com/gpu with a nodeSelector on a MIG
// single-strategy product is a slice of that pool, the form gpuadmit itself
// writes for such pools.
func TestMIGSingleStrategy(t *testing.T) {
	m := NewMutator(defaultEngine, StaticInventory{Inv: exampleInventory(t)}, MutatorOptions{})
	p := pod("p", map[string]string{"nvidia.com/gpu": "1"})
	p.Spec.NodeSelector = map[string]string{"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"}
	res := mustMutate(t, m, p)
	if !res.Allowed {
		t.Fatalf("denied: %s", res.Message)
	}
	if diff := cmp.Diff(map[string]string{"nvidia.com/gpu": "1"}, gpuResources(res.Pod.Spec.Containers[0])); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	if got := res.Pod.Annotations[record.AnnotationDecision]; !strings.Contains(got, "MIG 1g.5gb") || !strings.Contains(got, "pool a100-40gb-mig-1g.5gb;") {
		t.Errorf("decision %q, want a 1g.5gb slice of pool a100-40gb-mig-1g.5gb", got)
	}
}

// TestNoPlacementNamesEveryPool: a denial for want of a pool says, pool by
// pool, why each was not taken, including pools the policy never offered.
func TestNoPlacementNamesEveryPool(t *testing.T) {
	inv := exampleInventory(t)
	m := NewMutator(defaultEngine, StaticInventory{Inv: inv}, MutatorOptions{})
	p := pod("p", map[string]string{"nvidia.com/gpu": "1"})
	p.Spec.NodeSelector = map[string]string{"nvidia.com/gpu.product": "Tesla-V100"}
	res := mustMutate(t, m, p)
	if res.Allowed {
		t.Fatal("allowed, want a denial")
	}
	for _, pool := range inv.Pools {
		if !strings.Contains(res.Message, "pool "+pool.Name+": ") {
			t.Errorf("the denial gives no reason for pool %s: %s", pool.Name, res.Message)
		}
	}
	if want := "nvidia.com/gpu reaches it with the nodeSelector nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"; !strings.Contains(res.Message, want) {
		t.Errorf("the denial does not say how to reach the MIG single pool (%q): %s", want, res.Message)
	}
}

// TestSeveralMIGSlicesInOneContainer: several GPUs prefer whole GPUs; where
// only MIG fits, the slices come with a warning that names the container.
func TestSeveralMIGSlicesInOneContainer(t *testing.T) {
	tests := map[string]struct {
		m        *Mutator
		limits   map[string]string
		want     map[string]string
		wantWarn bool
	}{
		"whole GPUs first when a pool has them": {m: mutator(h100Mixed, a100Whole),
			limits: map[string]string{"nvidia.com/gpu": "2", "nvidia.com/gpumem": "30000"}, want: map[string]string{"nvidia.com/gpu": "2"}},
		"only MIG fits: slices with a warning": {m: mutator(h100Mixed),
			limits: map[string]string{"nvidia.com/gpu": "2", "nvidia.com/gpumem": "30000"}, want: map[string]string{"nvidia.com/mig-3g.40gb": "2"}, wantWarn: true},
		"one slice, no warning": {m: mutator(h100Mixed, a100Whole),
			limits: map[string]string{"nvidia.com/gpumem": "30000"}, want: map[string]string{"nvidia.com/mig-3g.40gb": "1"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := mustMutate(t, tc.m, pod("p", tc.limits))
			if !res.Allowed {
				t.Fatalf("denied: %s", res.Message)
			}
			if diff := cmp.Diff(tc.want, gpuResources(res.Pod.Spec.Containers[0])); diff != "" {
				t.Errorf("resources (-want +got):\n%s", diff)
			}
			warned := false
			for _, w := range res.Warnings {
				warned = warned || (strings.Contains(w, `container "a" gets 2 MIG 3g.40gb slices`) && strings.Contains(w, "a CUDA process sees one MIG device"))
			}
			if warned != tc.wantWarn {
				t.Errorf("warnings %q: warned about the slices %v, want %v", res.Warnings, warned, tc.wantWarn)
			}
		})
	}
}
