package replay

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/bench/packing"
	"github.com/gpuadmit/gpuadmit/pkg/mutate"
	"github.com/gpuadmit/gpuadmit/pkg/usage"
)

// TestUsageTraceOfAKnownPlacement: one node of two GPUs (1000 MiB each)
// and 12 CPUs. A 460 MiB share (4 CPUs) on GPU 0, a CPU-only pod (3
// CPUs), a 600 MiB share (2 CPUs) on GPU 1, then a pod of two whole GPUs
// that stays pending. After the third pod, 1060 of 2000 MiB arrived, past
// 25% and 50%: 540 and 400 MiB are free. As the leader sees it (6 CPUs
// free, the CPU-only pod unseen) the 460 MiB size fits the 540 hole, so
// only the 400 MiB hole is stranded; with the CPU-only pod's 3 CPUs
// taken, no size fits and both are. Fragmentation weighs the two share
// kinds by half: the 460 kind leaves the 400 hole (400), the 600 kind
// fits nowhere (940): 670. A 300 MiB size of 2 CPUs would use both holes:
// nothing stranded against it. The pending pod brings the 100% point, and
// changes none of that, since nothing fits it.
func TestUsageTraceOfAKnownPlacement(t *testing.T) {
	node := packing.Node{Name: "n0", MilliCPU: 12000, MemoryMiB: 65536, GPUs: 2, Model: "T4"}
	big := packing.Pod{Name: "big", MilliCPU: 2000, MemoryMiB: 1024, GPUs: 1, GPUMilli: 600}
	cpu3 := packing.Pod{Name: "cpu3", MilliCPU: 3000, MemoryMiB: 512}
	w := Workload{Nodes: []packing.Node{node}, Pods: []packing.Pod{share, cpu3, big, two}}
	objs, claims := apiObjects(w.Pods, map[string]Placement{
		"share": {Node: "n0", GPUs: []int{0}}, "cpu3": {Node: "n0"}, "big": {Node: "n0", GPUs: []int{1}},
	})
	c := Cluster{Nodes: []corev1.Node{*Node(node)}, Pods: objs, Claims: claims}
	c.Slices = append(c.Slices, *Slice(node))
	o := UsageOptions{Sizes: TypicalSizes([]packing.Pod{share, cpu3, big, two, share}), At: []float64{0.25, 0.5, 1},
		PolicySizes: []usage.Size{{GPUMemoryMiB: 300, GPUs: 1, MilliCPU: 2000}}} // fits both holes
	got, err := UsageTrace(w, c, o)
	if err != nil {
		t.Fatal(err)
	}
	placed := UsagePoint{Pods: 3, CapacityMiB: 2000, AllocatedMiB: 1060, FreeMiB: 940,
		StrandedMiB: 400, StrandedAllPodsMiB: 940, StrandedPolicySizesMiB: 0, FragmentationMiB: 670}
	at := func(arrived float64, u UsagePoint) UsagePoint { u.Arrived = arrived; return u }
	all := at(1, placed)
	all.Pods, all.PendingPods, all.PendingMiB = 4, 1, 2000
	want := []UsagePoint{at(0.25, placed), at(0.5, placed), all}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trace (-want +got):\n%s", diff)
	}
}

func TestTypicalSizesAreTheListsDistinctGPURequests(t *testing.T) {
	got := TypicalSizes([]packing.Pod{two, share, cpu, share})
	want := []usage.Size{
		{GPUMemoryMiB: 460, GPUs: 1, MilliCPU: 4000, MemoryMiB: 1024},
		{GPUMemoryMiB: 1000, GPUs: 2, MilliCPU: 8000, MemoryMiB: 2048},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sizes (-want +got):\n%s", diff)
	}
}

func TestUsageTraceRefusesAPodNotOfTheWorkload(t *testing.T) {
	w := Workload{Nodes: []packing.Node{t4x2}, Pods: []packing.Pod{share}}
	objs, _ := apiObjects([]packing.Pod{share, share}, nil)
	if _, err := UsageTrace(w, Cluster{Pods: objs}, UsageOptions{}); err == nil {
		t.Error("a pod past the workload's end was read")
	}
}

// A trace pod that names GPU models (gpu_spec) may go only to nodes of
// those models, as the simulator's fit has it; a GPU pod carries gpuadmit's
// label, a pod without GPU neither.
func TestPodCarriesItsModelsAndGpuadmitsLabel(t *testing.T) {
	pinned := share
	pinned.Spec = "V100M16|V100M32"
	p := Pod("x", "s", pinned)
	terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	want := []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: modelLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"V100M16", "V100M32"}}}}}
	if diff := cmp.Diff(want, terms); diff != "" {
		t.Errorf("node affinity (-want +got):\n%s", diff)
	}
	if p.Labels[mutate.LabelManaged] != "true" {
		t.Errorf("labels %v, want %s=true", p.Labels, mutate.LabelManaged)
	}
	if free := Pod("y", "s", share); free.Spec.Affinity != nil {
		t.Errorf("a pod without gpu_spec has affinity %v", free.Spec.Affinity)
	}
	if c := Pod("z", "s", cpu); c.Labels[mutate.LabelManaged] != "" {
		t.Errorf("a pod without GPU is labelled %v", c.Labels)
	}
}

// usage.csv holds a row per configuration and point, every figure in it.
func TestUsageCSVHoldsEveryPoint(t *testing.T) {
	u := UsagePoint{Arrived: 0.5, Pods: 3, CapacityMiB: 2000, AllocatedMiB: 1060, FreeMiB: 940, StrandedMiB: 400,
		StrandedAllPodsMiB: 940, StrandedPolicySizesMiB: 100, FragmentationMiB: 670.25, PendingPods: 1, PendingMiB: 2000}
	r := &Report{Replayed: []Replayed{{Config: "default", Usage: []UsagePoint{u}}, {Config: GPUAdmit}}}
	path := filepath.Join(t.TempDir(), "usage.csv")
	if err := r.writeUsageCSV(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{usageHeader, {"default", "0.50", "3", "2000", "1060", "940", "400", "940", "100", "670.2", "1", "2000"}}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("usage.csv (-want +got):\n%s", diff)
	}
}

// The plot has three lines per configuration with a trace, each a figure
// at every point, in % of capacity against % arrived.
func TestUsageLines(t *testing.T) {
	u := UsagePoint{Arrived: 0.5, CapacityMiB: 2000, StrandedMiB: 400, StrandedAllPodsMiB: 940, FragmentationMiB: 670}
	r := &Report{Replayed: []Replayed{{Config: "default", Usage: []UsagePoint{u}}, {Config: GPUAdmit}}}
	var got []string
	for _, s := range r.usageLines() {
		got = append(got, fmt.Sprintf("%s %v", s.Name, s.XYs))
	}
	want := []string{"default: stranded [{50 20}]", "default: stranded, all pods [{50 47}]", "default: fragmentation [{50 33.5}]"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}
