package perf

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// dataItem is one result of the harness as its JSON file holds it
// (scheduler_perf's DataItem).
type dataItem struct {
	Data   map[string]float64 `json:"data"`
	Unit   string             `json:"unit"`
	Labels map[string]string  `json:"labels"`
}

// readItems reads the harness's newest result file of topic in dir,
// written after since.
func readItems(dir, topic string, since time.Time) ([]dataItem, string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*_benchmark_"+topic+"_*.json"))
	if err != nil {
		return nil, "", err
	}
	var newest string
	var at time.Time
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err == nil && !fi.ModTime().Before(since) && fi.ModTime().After(at) {
			newest, at = p, fi.ModTime()
		}
	}
	if newest == "" {
		return nil, "", fmt.Errorf("no result file of topic %s in %s written since %s", topic, dir, since.Format(time.RFC3339))
	}
	raw, err := os.ReadFile(newest)
	if err != nil {
		return nil, "", err
	}
	var f struct {
		DataItems []dataItem `json:"dataItems"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, "", fmt.Errorf("%s: %w", newest, err)
	}
	return f.DataItems, newest, nil
}

// find is the item of run's measured namespace with metric and labels.
func find(items []dataItem, run, metric string, labels map[string]string) (dataItem, bool) {
	for _, it := range items {
		if it.Labels["Name"] != run+"/"+measured || it.Labels["Metric"] != metric {
			continue
		}
		ok := true
		for k, v := range labels {
			ok = ok && it.Labels[k] == v
		}
		if ok {
			return it, true
		}
	}
	return dataItem{}, false
}

// row is one workload run of the report.
type row struct {
	run      string // the harness's name of the run
	gpuadmit bool   // the profile has GPUAdmit
	throughput,
	attemptMs, // mean scheduling attempt (cycle and binding), scheduled pods
	algorithmMs, // mean scheduling algorithm: the cycle up to the node's choice
	scoreMs float64 // mean Score extension point, all plugins
	pods, cycles, scoreCalls, scored int64
	// GPUAdmit's time per cycle, ms: PreScore (its placement) and every
	// extension point summed (Filter and Score summed over nodes).
	preScoreMs, pluginMs float64
}

func (r row) callsPerPod() float64 {
	if r.pods == 0 {
		return 0
	}
	return float64(r.scoreCalls) / float64(r.pods)
}

// share is GPUAdmit's time per cycle over the mean scheduling algorithm.
func (r row) share() float64 {
	if r.algorithmMs == 0 {
		return 0
	}
	return r.pluginMs / r.algorithmMs
}

// invalid says why a GPUAdmit run does not measure GPUAdmit; "" when it does.
func (r row) invalid() string {
	switch {
	case !r.gpuadmit:
		return ""
	case r.pods == 0:
		return "GPUAdmit saw no measured pod"
	case r.scoreCalls == 0:
		return "GPUAdmit's Score was never called"
	case r.scored == 0:
		return "GPUAdmit scored no node (every Score call returned unscored)"
	}
	return ""
}

func makeRow(run string, s *stats, items []dataItem) row {
	r := row{run: run}
	if it, ok := find(items, run, "SchedulingThroughput", nil); ok {
		r.throughput = it.Data["Average"]
	}
	if it, ok := find(items, run, "scheduler_scheduling_attempt_duration_seconds", map[string]string{"result": "scheduled"}); ok {
		r.attemptMs = it.Data["Average"]
	}
	if it, ok := find(items, run, "scheduler_scheduling_algorithm_duration_seconds", nil); ok {
		r.algorithmMs = it.Data["Average"]
	}
	if it, ok := find(items, run, "scheduler_framework_extension_point_duration_seconds", map[string]string{"extension_point": "Score"}); ok {
		r.scoreMs = it.Data["Average"]
	}
	if s == nil {
		return r
	}
	r.pods, r.cycles, r.scoreCalls, r.scored = s.podCount.Load(), s.cycles.Load(), s.scoreCalls.Load(), s.scored.Load()
	if r.cycles > 0 {
		ms := func(ns int64) float64 { return float64(ns) / 1e6 / float64(r.cycles) }
		r.preScoreMs = ms(s.preScore.Load())
		r.pluginMs = ms(s.preFilter.Load() + s.filter.Load() + s.preScore.Load() + s.score.Load() + s.normalize.Load())
	}
	return r
}

// markdown is the report's table, runs in the order given.
func markdown(rows []row) string {
	var b strings.Builder
	b.WriteString("| run | pods/s | attempt ms | algorithm ms | Score phase ms | GPUAdmit Score calls/pod | GPUAdmit PreScore ms/cycle | GPUAdmit ms/cycle | GPUAdmit share of algorithm |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %.1f | %.2f | %.2f | %.2f |", r.run, r.throughput, r.attemptMs, r.algorithmMs, r.scoreMs)
		if !r.gpuadmit {
			b.WriteString(" – | – | – | – |\n")
			continue
		}
		fmt.Fprintf(&b, " %.1f | %.2f | %.2f | %.0f%% |\n", r.callsPerPod(), r.preScoreMs, r.pluginMs, 100*r.share())
	}
	return b.String()
}

// runNames are the runs of items (Name labels less the namespace), in
// the order the harness ran them.
func runNames(items []dataItem) []string {
	var out []string
	for _, it := range items {
		name, ok := strings.CutSuffix(it.Labels["Name"], "/"+measured)
		if ok && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// TestInvalid checks which runs the benchmark refuses: a GPUAdmit run
// whose plugin saw no pod, was never asked to score, or scored no node.
func TestInvalid(t *testing.T) {
	tests := map[string]struct {
		r       row
		invalid bool
	}{
		"a stock run has no GPUAdmit calls to count": {r: row{}},
		"GPUAdmit scored":           {r: row{gpuadmit: true, pods: 20, scoreCalls: 752, scored: 752}},
		"GPUAdmit saw no pod":       {r: row{gpuadmit: true}, invalid: true},
		"Score never called":        {r: row{gpuadmit: true, pods: 20}, invalid: true},
		"every Score call unscored": {r: row{gpuadmit: true, pods: 20, scoreCalls: 752}, invalid: true},
	}
	for name, tc := range tests {
		if got := tc.r.invalid(); (got != "") != tc.invalid {
			t.Errorf("%s: invalid() = %q, want invalid %v", name, got, tc.invalid)
		}
	}
}
