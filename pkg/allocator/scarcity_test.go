package allocator

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestScarcity(t *testing.T) {
	// 100 GPUs: 10 of A, 30 of B, 60 of C. Demand per pod: a whole A GPU
	// (a tenth of the pods), half a GPU on A or B (a fifth), two GPUs
	// anywhere, and CPU only. The workload's GPU demand is 0.1 + 0.1 +
	// 1.4 = 1.6 per pod; filling 100 GPUs, A-only needs 6.25, A|B 6.25,
	// spread 1:3 over A and B.
	tasks := []FragTask{
		{MilliCPU: 1000, GPUMilli: 1000, GPUs: 1, Spec: "A", Weight: 0.1},
		{MilliCPU: 1000, GPUMilli: 500, GPUs: 1, Spec: "A|B", Weight: 0.2},
		{MilliCPU: 1000, GPUMilli: 1000, GPUs: 2, Weight: 0.7},
		{MilliCPU: 8000, Spec: "A", Weight: 0.1}, // no GPU: nothing to keep for it
	}
	supply := map[string]int{"A": 10, "B": 30, "C": 60, "D": 0}
	got := Scarcity(tasks, supply)
	want := map[string]float64{"A": (6.25 + 6.25/4) / 10, "B": 6.25 * 3 / 4 / 30}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
		t.Errorf("Scarcity (-want +got)\n%s", diff)
	}

	// A kind pinned to a model the cluster lacks keeps nothing; one that
	// needs more than its model has prices it at 1, not more.
	tasks = []FragTask{{GPUMilli: 1000, GPUs: 1, Spec: "E", Weight: 0.5}, {GPUMilli: 1000, GPUs: 1, Spec: "A", Weight: 0.5}}
	if got := Scarcity(tasks, supply); got["A"] != 1 || len(got) != 1 {
		t.Errorf("Scarcity with a kind pinned to a missing model and one overflowing A: %v, want A at 1 only", got)
	}
	// A model named twice counts once; a model with no GPUs takes none of
	// the demand (A|D is A's alone).
	tasks = []FragTask{{GPUMilli: 1000, GPUs: 1, Spec: "B|B", Weight: 0.2}, {GPUMilli: 1000, GPUs: 1, Spec: "A|D", Weight: 0.1},
		{GPUMilli: 1000, GPUs: 1, Weight: 0.7}}
	want = map[string]float64{"A": 10.0 / 10, "B": 20.0 / 30}
	if diff := cmp.Diff(want, Scarcity(tasks, supply), cmpopts.EquateApprox(0, 1e-12)); diff != "" {
		t.Errorf("Scarcity with a repeated model and a model without GPUs (-want +got)\n%s", diff)
	}
	// Tasks of a spec seen before take the models it took then: split in
	// turns, a workload is priced as it is whole.
	split := []FragTask{{GPUMilli: 1000, GPUs: 1, Spec: "A|B", Weight: 0.1}, {GPUMilli: 500, GPUs: 1, Spec: "C", Weight: 0.1},
		{GPUMilli: 1000, GPUs: 1, Spec: "A|B", Weight: 0.1}, {GPUMilli: 500, GPUs: 1, Spec: "C", Weight: 0.1}, {GPUMilli: 1000, GPUs: 1, Weight: 0.6}}
	whole := []FragTask{{GPUMilli: 1000, GPUs: 1, Spec: "A|B", Weight: 0.2}, {GPUMilli: 500, GPUs: 1, Spec: "C", Weight: 0.2},
		{GPUMilli: 1000, GPUs: 1, Weight: 0.6}}
	if diff := cmp.Diff(Scarcity(whole, supply), Scarcity(split, supply), cmpopts.EquateApprox(0, 1e-12)); diff != "" || len(Scarcity(split, supply)) != 3 {
		t.Errorf("Scarcity of a workload whose specs come in turns (-whole +split)\n%s", diff)
	}
	if got := Scarcity(growthTasks, supply); got != nil {
		t.Errorf("Scarcity without pinned kinds: %v, want nil", got)
	}
	if got := Scarcity(tasks, nil); got != nil {
		t.Errorf("Scarcity without supply: %v, want nil", got)
	}
}

// TestPlacerPricesScarceGPUs: a placer told the supply adds Scarcity per
// milli-GPU taken, on Cost and CostOn alike; a CPU-only request pays
// nothing.
func TestPlacerPricesScarceGPUs(t *testing.T) {
	tasks := []FragTask{
		{MilliCPU: 1000, GPUMilli: 1000, GPUs: 1, Spec: "A", Weight: 0.5},
		{MilliCPU: 1000, GPUMilli: 500, GPUs: 1, Weight: 0.5},
	}
	n := FragNode{MilliCPULeft: 64000, MemoryMiBLeft: 65536, GPUMilliLeft: []int64{1000, 1000}, Model: "A"}
	share := FragTask{MilliCPU: 1000, GPUMilli: 500, GPUs: 1}
	cpu := FragTask{MilliCPU: 1000}
	plain, priced := NewPlacer(tasks), NewPlacer(tasks)
	priced.SetSupply(map[string]int{"A": 30, "B": 2}) // A-pinned: 2/3 of 32 GPUs
	rho := priced.Scarcity("A")
	if rho <= 0 || rho >= 1 || priced.Scarcity("B") != 0 {
		t.Fatalf("Scarcity A %v, B %v; want A in (0, 1), B 0", rho, priced.Scarcity("B"))
	}
	before := plain.Fragmentation(n)
	for _, tc := range []struct {
		name string
		req  FragTask
		gpus []int
	}{{"share", share, []int{1}}, {"two GPUs", FragTask{MilliCPU: 1000, GPUMilli: 1000, GPUs: 2}, []int{0, 1}}, {"CPU only", cpu, nil}} {
		c0, _, ok0 := plain.Cost(n, before, tc.req)
		c1, _, ok1 := priced.Cost(n, before, tc.req)
		o0, _ := plain.CostOn(n, before, tc.req, tc.gpus)
		o1, _ := priced.CostOn(n, before, tc.req, tc.gpus)
		want := rho * float64(tc.req.GPUMilli*int64(tc.req.GPUs))
		if !ok0 || !ok1 || math.Abs(c1-c0-want) > 1e-9 || math.Abs(o1-o0-want) > 1e-9 {
			t.Errorf("%s: Cost %v → %v, CostOn %v → %v; want each %v more", tc.name, c0, c1, o0, o1, want)
		}
	}
}

// BenchmarkScarcity457Tasks prices a workload of as many kinds as the
// gpuspec33 list asks (457), each pinned to one of seven models or to two,
// over the 1,213-node replay's models: the price a workload revision makes
// in gpuadmit-scheduler.
func BenchmarkScarcity457Tasks(b *testing.B) {
	models := []string{"A10", "A100", "G2", "G3", "P100", "T4", "V100M16", "V100M32"}
	supply := map[string]int{}
	for i, m := range models {
		supply[m] = 100 * (i + 1)
	}
	tasks := make([]FragTask, 457)
	for i := range tasks {
		spec := models[i%7]
		if i%3 == 0 {
			spec += "|" + models[7]
		}
		tasks[i] = FragTask{MilliCPU: 1000, GPUMilli: int64(100 * (1 + i%10)), GPUs: 1, Spec: spec, Weight: 1 / 457.0}
	}
	for b.Loop() {
		Scarcity(tasks, supply)
	}
}
