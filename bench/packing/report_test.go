package packing

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func result(policy string, seed uint64, p50, p99 float64, unalloc ...float64) Result {
	r := Result{Policy: policy, Workload: "default", Seed: seed, DecisionP50us: p50, DecisionP99us: p99}
	for i, u := range unalloc {
		r.Points = append(r.Points, Point{Arrived: 0.9 + 0.1*float64(i), AllocatedPct: 100 - u, UnallocatedPct: u})
	}
	return r
}

func TestSummarize(t *testing.T) {
	results := []Result{
		result("fgd", 42, 10, 100, 12, 4),
		result("fgd", 43, 20, 300, 14, 8),
		result("fgd", 44, 30, 200, 10, 2),
		result("fgd", 45, 40, 400, 16, 6),
		result("random", 42, 1, 2, 20),
	}
	want := []Summary{{
		Workload: "default", Policy: "fgd", Seeds: []uint64{42, 43, 44, 45},
		Points: []PointSummary{
			{Arrived: 0.9, Runs: 4, Unallocated: Stat{Mean: 13, Median: 13, Min: 10, Max: 16}, Allocated: Stat{Mean: 87, Median: 87, Min: 84, Max: 90}},
			{Arrived: 1, Runs: 4, Unallocated: Stat{Mean: 5, Median: 5, Min: 2, Max: 8}, Allocated: Stat{Mean: 95, Median: 95, Min: 92, Max: 98}},
		},
		DecisionP50us: 25, DecisionP99us: 250, DecisionP99MaxUs: 400,
		At100BySeed: map[uint64]float64{42: 4, 43: 8, 44: 2, 45: 6},
	}, {
		Workload: "default", Policy: "random", Seeds: []uint64{42},
		Points:        []PointSummary{{Arrived: 0.9, Runs: 1, Unallocated: Stat{Mean: 20, Median: 20, Min: 20, Max: 20}, Allocated: Stat{Mean: 80, Median: 80, Min: 80, Max: 80}}},
		DecisionP50us: 1, DecisionP99us: 2, DecisionP99MaxUs: 2,
	}}
	if diff := cmp.Diff(want, Summarize(results)); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func TestDescribe(t *testing.T) {
	tests := map[string]struct {
		xs   []float64
		want Stat
	}{
		"odd sample: the middle value":      {xs: []float64{9, 1, 5}, want: Stat{Mean: 5, Median: 5, Min: 1, Max: 9}},
		"even sample: the middle two, mean": {xs: []float64{4, 1, 10, 2}, want: Stat{Mean: 4.25, Median: 3, Min: 1, Max: 10}},
		"skewed: median is not the mean":    {xs: []float64{1, 1, 1, 1, 16}, want: Stat{Mean: 4, Median: 1, Min: 1, Max: 16}},
		"empty":                             {xs: nil, want: Stat{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, describe(tc.xs)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestMarkdown(t *testing.T) {
	at100 := func(workload, policy string, u float64) Summary {
		return Summary{Workload: workload, Policy: policy, Seeds: []uint64{42, 43},
			Points: []PointSummary{{Arrived: 1, Runs: 2, Unallocated: Stat{Mean: u, Median: u, Min: u - 1, Max: u + 1}}}}
	}
	md := Markdown([]Summary{
		at100("default", "fgd", 5.77), at100("default", "random", 13.2), at100("default", "other", 3),
		at100("gpushare40", "fgd", 6), at100("gpushare20", "fgd", 4),
	})
	def, rest, ok := strings.Cut(md, "## gpushare40")
	if !ok {
		t.Fatalf("no gpushare40 table in\n%s", md)
	}
	share40, share, ok := strings.Cut(rest, "## gpushare20")
	if !ok {
		t.Fatalf("no gpushare20 table in\n%s", md)
	}
	// the artifact's mean for FGD on gpushare40 is 6.04
	if row := "| fgd | 6.00 | 6.00 | 5.00–7.00 | – | – | – | 0.0 | 0.0 | 0.0 | 6.04 | -0.04 |"; !strings.Contains(share40, row) {
		t.Errorf("gpushare40 table lacks %q:\n%s", row, share40)
	}
	for _, want := range []string{
		"| paper @100% | Δ vs paper (pp) |",
		"| fgd | 5.77 | 5.77 | 4.77–6.77 | – | – | – | 0.0 | 0.0 | 0.0 | 4.77 | +1.00 |",
		"| random | 13.20 | 13.20 | 12.20–14.20 | – | – | – | 0.0 | 0.0 | 0.0 | 13.70 | -0.50 |",
		"| other | 3.00 | 3.00 | 2.00–4.00 | – | – | – | 0.0 | 0.0 | 0.0 |  |  |",
		"Seeds: 42, 43 (2 per row)",
	} {
		if !strings.Contains(def, want) {
			t.Errorf("default table lacks %q:\n%s", want, def)
		}
	}
	if strings.Index(def, "| random |") > strings.Index(def, "| fgd |") {
		t.Errorf("rows not in the order of Policies:\n%s", def)
	}
	if strings.Contains(share, "paper") || !strings.Contains(share, "| fgd | 4.00 | 4.00 | 3.00–5.00 | – | – | – | 0.0 | 0.0 | 0.0 |\n") {
		t.Errorf("gpushare20 (not in the paper) table has a paper column or lacks its row:\n%s", share)
	}
}

func TestRunMatrix(t *testing.T) {
	dir := writeTrace(t, "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,4,P100\nn1,64000,262144,4,P100\n",
		"name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\np0,4000,8192,1,500,,LS\np1,8000,16384,2,1000,,LS\np2,1000,1024,1,250,,BE\n")
	got, err := RunMatrix(dir, []string{"test"}, []string{"random", "bestfit"}, []uint64{7, 8}, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, r := range got {
		order = append(order, fmt.Sprintf("%s/%d", r.Policy, r.Seed))
	}
	if diff := cmp.Diff([]string{"random/7", "random/8", "bestfit/7", "bestfit/8"}, order); diff != "" {
		t.Errorf("order (-want +got)\n%s", diff)
	}
	one, err := RunStudy(Study{Trace: dir, Workload: "test", Policy: "bestfit", Seed: 8})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(one.Points, got[3].Points); diff != "" {
		t.Errorf("bestfit/8 in the matrix differs from its own run (-alone +matrix)\n%s", diff)
	}
}

func TestRunMatrixChecksFirst(t *testing.T) {
	dir := writeTrace(t, "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,4,P100\n",
		"name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\np0,4000,8192,1,500,,LS\n")
	tests := map[string]struct {
		workloads, policies []string
		want                string
	}{
		"a missing workload": {workloads: []string{"test", "nope"}, policies: []string{"random"}, want: "load workload nope"},
		"an unknown policy":  {workloads: []string{"test"}, policies: []string{"random", "tetris"}, want: `unknown policy "tetris"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var progress strings.Builder
			_, err := RunMatrix(dir, tc.workloads, tc.policies, []uint64{1}, 1, &progress)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
			if progress.Len() > 0 {
				t.Errorf("runs before the check failed:\n%s", progress.String())
			}
		})
	}
}

func TestMargins(t *testing.T) {
	in := func(w string, r Result) Result { r.Workload = w; return r }
	results := []Result{
		// a: gpuadmit lower on every seed, ranges apart
		in("a", result("fgd", 42, 0, 0, 9, 5)), in("a", result("fgd", 43, 0, 0, 9, 6)),
		in("a", result("gpuadmit", 42, 0, 0, 9, 4)), in("a", result("gpuadmit", 43, 0, 0, 9, 4.5)),
		// b: lower on every seed, but the ranges meet
		in("b", result("fgd", 42, 0, 0, 9, 5)), in("b", result("fgd", 43, 0, 0, 9, 7)),
		in("b", result("gpuadmit", 42, 0, 0, 9, 4)), in("b", result("gpuadmit", 43, 0, 0, 9, 6)),
		// c: higher on one seed; seed 44 only fgd ran
		in("c", result("fgd", 42, 0, 0, 9, 5)), in("c", result("fgd", 43, 0, 0, 9, 5)), in("c", result("fgd", 44, 0, 0, 9, 1)),
		in("c", result("gpuadmit", 42, 0, 0, 9, 4)), in("c", result("gpuadmit", 43, 0, 0, 9, 5.5)),
		// d: no gpuadmit
		in("d", result("fgd", 42, 0, 0, 9, 5)),
		// e: gpuadmit higher on every seed, ranges apart; f: higher on every seed, ranges meet
		in("e", result("fgd", 42, 0, 0, 9, 4)), in("e", result("gpuadmit", 42, 0, 0, 9, 5)),
		in("f", result("fgd", 42, 0, 0, 9, 4)), in("f", result("fgd", 43, 0, 0, 9, 6)),
		in("f", result("gpuadmit", 42, 0, 0, 9, 4.5)), in("f", result("gpuadmit", 43, 0, 0, 9, 6.5)),
	}
	ms := Margins(Summarize(results), "gpuadmit", "fgd")
	var got []string
	for _, m := range ms {
		got = append(got, fmt.Sprintf("%s %+.2f %d/%d %s", m.Workload, m.Diff.Mean, m.Wins, m.Runs, m.Spread()))
	}
	want := []string{"a -1.25 2/2 apart", "b -1.00 2/2 every seed", "c -0.25 1/2 inside",
		"e +1.00 0/1 apart (worse)", "f +0.50 0/2 every seed (worse)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	md := Markdown(Summarize(results))
	if row := "| c | 5.00 | 5.00–5.00 | 4.75 | 4.00–5.50 | -0.25 | -1.00…+0.50 | 1/2 | inside |"; !strings.Contains(md, row) {
		t.Errorf("summary lacks %q:\n%s", row, md)
	}
}
