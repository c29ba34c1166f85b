package e2e

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/report"
	"github.com/gpuadmit/gpuadmit/pkg/usage"
)

// TestCostReport: `gpuadmit report` against the real control plane (what
// report.Cluster lists from the API server: Nodes, gpuadmit's pods,
// ResourceQuotas, ResourceSlices and ResourceClaims) gives the worked
// example's figures: on a DRA node of two A100 40GB GPUs, two 34 GiB
// shares bound and two 10 GiB pods refused by the real scheduler leave
// 6 GiB free on each GPU, all of it stranded; each GPU holds 34 GiB under
// its UUID; 2 pods asking 20 GiB wait for GPU.
func TestCostReport(t *testing.T) {
	ctx := context.Background()
	const pool = "report-dra"
	splitSharePool(t, ctx, pool, "report")
	cfg, err := report.Config(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.PricePerGPUHour = map[string]float64{"A100-40GB": 1.5}

	a100, _ := allocator.Default().Model("A100-40GB")
	const shareMiB, askMiB = 34 << 10, 10 << 10
	free := a100.MemoryMiB - shareMiB                                   // on each GPU
	cents := func(f float64) float64 { return math.Round(f*100) / 100 } // the report's rounding
	gpus := func(mib int64) float64 { return cents(float64(mib) / float64(a100.MemoryMiB)) }
	want := report.PoolView{Name: pool, Model: "A100-40GB", GPUs: 2, GPUMemoryMiB: a100.MemoryMiB,
		CapacityMiB: 2 * a100.MemoryMiB, AllocatedMiB: 2 * shareMiB, FreeMiB: 2 * free, StrandedMiB: 2 * free,
		AllocatedGPUs: gpus(2 * shareMiB), FreeGPUs: gpus(2 * free), StrandedGPUs: gpus(2 * free),
		PendingPods: 2, PendingMiB: 2 * askMiB,
		Allocated: []report.Allocation{{Namespace: "team-a", Form: string(usage.FormShare), MiB: 2 * shareMiB, GPUs: gpus(2 * shareMiB)}},
		Pending:   []report.Pending{{Namespace: "team-a", Reason: string(usage.ReasonGPU), Pods: 2, MiB: 2 * askMiB}}}
	var last report.View
	waitFor(t, "the report's "+pool, 60*time.Second, func() (bool, string) {
		in, err := report.Cluster(ctx, env.Client, cfg)
		if err != nil {
			return false, err.Error()
		}
		last = report.Of(usage.Compute(in))
		for _, p := range last.Pools {
			if p.Name == pool {
				got := p
				got.Mode, got.FragmentationMiB = "", 0 // not this test's
				got.PricePerGPUHour, got.AllocatedCostPerHour, got.StrandedCostPerHour = nil, nil, nil
				diff := cmp.Diff(want, got)
				return diff == "", "(-want +got):\n" + diff
			}
		}
		return false, fmt.Sprintf("no pool %s in %+v", pool, last.Pools)
	})
	var held34 int
	for _, g := range last.GPUs {
		if g.Pool == pool && g.AllocatedMiB == shareMiB && g.UUID != "" {
			held34++
		}
	}
	if held34 != 2 {
		t.Errorf("the report's GPUs of %s: %+v; want two holding %d MiB under their UUIDs", pool, last.GPUs, shareMiB)
	}
	for _, p := range last.Pools {
		if p.Name == pool && (p.AllocatedCostPerHour == nil || *p.AllocatedCostPerHour != cents(gpus(2*shareMiB)*1.5)) {
			t.Errorf("%s costs %v an hour, want %v GPUs at 1.5", pool, p.AllocatedCostPerHour, gpus(2*shareMiB))
		}
	}
}
