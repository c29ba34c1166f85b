package admission

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// stat is a /proc/<pid>/stat line with utime and stime in clock ticks.
func stat(pid int, comm string, ppid, utime, stime int) string {
	return fmt.Sprintf("%d (%s) S %d %d 0 0 -1 4194560 100 0 0 0 %d %d 0 0 20 0 12 0 1000 0 0", pid, comm, ppid, pid, utime, stime)
}

func TestAttribute(t *testing.T) {
	const self = 100
	tests := map[string]struct {
		stats []string
		want  map[string]float64
	}{
		"the bench holds the clients, each webhook server is its own child": {
			stats: []string{
				stat(self, "gpuadmit-bench", 1, 150, 50),
				stat(101, "kube-apiserver", self, 900, 100),
				stat(102, "etcd", self, 300, 100),
				stat(103, "gpuadmit", self, 250, 50),
				stat(104, "noop-webhook", self, 80, 20),
				stat(105, "opa", self, 400, 0),
				stat(106, "kube-controller", self, 10, 0),
			},
			want: map[string]float64{"bench": 2, "kube-apiserver": 10, "etcd": 4, "gpuadmit": 3, "noop-webhook": 1, "opa": 4, "kube-controller": 0.1},
		},
		"other processes and grandchildren are not ours": {
			stats: []string{
				stat(self, "admission.test", 1, 100, 0),
				stat(103, "gpuadmit", self, 100, 0),
				stat(200, "gpuadmit", 1, 5000, 0),      // another engineer's webhook
				stat(201, "go", 103, 700, 0),           // a child of a child
				stat(202, "kube-apiserver", 1, 900, 0), // another cluster
			},
			want: map[string]float64{"bench": 1, "gpuadmit": 1},
		},
		"two children of one name add up; unreadable lines are skipped": {
			stats: []string{
				stat(self, "gpuadmit-bench", 1, 0, 0),
				stat(103, "gpuadmit", self, 100, 0),
				stat(107, "gpuadmit", self, 0, 100),
				"107 (truncated",
			},
			want: map[string]float64{"bench": 0, "gpuadmit": 2},
		},
		"a comm with spaces and parentheses": {
			stats: []string{stat(self, "bench", 1, 0, 0), stat(108, "odd) (name", self, 100, 0)},
			want:  map[string]float64{"bench": 0, "odd) (name": 1},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if d := cmp.Diff(tt.want, attribute(self, tt.stats)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestCPUOverPairsRounds: the extra CPU of one configuration over another is
// taken round by round, each round against the other's round of the same
// number (they ran minutes apart, under the same background), and reported
// as the mean and range of those differences.
func TestCPUOverPairsRounds(t *testing.T) {
	rounds := func(totals ...float64) []Round {
		var out []Round
		for i, ms := range totals {
			out = append(out, Round{Round: i, CPUMsPerPod: map[string]float64{"kube-apiserver": ms}, CPUTotalMsPerPod: ms})
		}
		return out
	}
	g := &Result{Config: Gpuadmit, Rounds: rounds(5, 4, 6)}
	n := &Result{Config: Noop, Rounds: rounds(3, 3.5, 3)}
	got, ok := cpuOver(g, n)
	if !ok {
		t.Fatal("no rounds paired")
	}
	if want := (spread{Mean: (2 + 0.5 + 3) / 3.0, Min: 0.5, Max: 3}); cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)) != "" {
		t.Errorf("got %+v, want %+v", got, want)
	}
	// A round the other configuration lacks, or one measured before
	// rounds recorded their CPU, pairs with nothing.
	n.Rounds = n.Rounds[:2]
	g.Rounds[1].CPUMsPerPod = nil
	if got, _ := cpuOver(g, n); got != (spread{Mean: 2, Min: 2, Max: 2}) {
		t.Errorf("with round 1 unmeasured and no round 2 to pair: got %+v, want round 0 alone", got)
	}
	if _, ok := cpuOver(g, nil); ok {
		t.Error("against a configuration that did not run: want no figure")
	}
}

// TestTargetsMarkCPUAndLatency: the targets table marks gpuadmit's extra CPU over
// the no-op against 0.3 ms for pods of one template and 1 ms for pods that
// all differ, and its p99 against +10% / +25% at 1 and 10 clients only.
func TestTargetsMarkCPUAndLatency(t *testing.T) {
	result := func(config string, level int, p99 float64, totals ...float64) Result {
		r := Result{Config: config, Level: level, Latency: Latency{P99Ms: p99}}
		for i, ms := range totals {
			r.Rounds = append(r.Rounds, Round{Round: i, CPUMsPerPod: map[string]float64{"x": ms}, CPUTotalMsPerPod: ms})
		}
		return r
	}
	rep := Report{Settings: Settings{Levels: []int{10, 50}, Mix: MixTemplate}, Results: []Result{
		result(Noop, 10, 10, 3, 3), result(Patch, 10, 10.5, 3.4, 3.4), result(Gpuadmit, 10, 10.8, 3.5, 3.5),
		result(Noop, 50, 10, 3, 3), result(Gpuadmit, 50, 20, 3.2, 3.2),
	}}
	var b strings.Builder
	rep.targets(&b)
	lines := strings.Split(b.String(), "\n")
	for _, want := range []string{
		"| 10 | 0.50 (0.50 to 0.50) missed | 0.40 (0.40 to 0.40) | 0.10 (0.10 to 0.10) | +8% met | +5% |",
		"| 50 | 0.20 (0.20 to 0.20) met | – | – | +100% | – |",
	} {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, want) }) {
			t.Errorf("no line starts %q in:\n%s", want, b.String())
		}
	}
	// The review p99: the native histogram's bound where there is one.
	review := func(buckets string, est, le float64) []ServerLatency {
		return []ServerLatency{{Metric: `gpuadmit_webhook_review_duration_seconds{webhook="mutate"}`, Buckets: buckets, Count: 1, P99EstMs: est, P99LeMs: le}}
	}
	one := Report{Settings: Settings{Levels: []int{1}, Mix: MixTemplate}, Results: []Result{result(Gpuadmit, 1, 10, 1)}}
	for _, tc := range []struct {
		server []ServerLatency
		want   string
	}{
		{review("native", 0, 0.9), "≤ 0.90 ms met"},
		{review("classic", 1.47, 2.5), "est. 1.47 ms missed"},
	} {
		one.Results[0].Server = tc.server
		b.Reset()
		one.targets(&b)
		if !strings.Contains(b.String(), "| "+tc.want+" |") {
			t.Errorf("%s review histogram: want %q in:\n%s", tc.server[0].Buckets, tc.want, b.String())
		}
	}
	rep.Settings.Mix = MixDistinct
	b.Reset()
	rep.targets(&b)
	if !strings.Contains(b.String(), "| 10 | 0.50 (0.50 to 0.50) met |") {
		t.Errorf("distinct pods: 0.5 ms is under their 1 ms target:\n%s", b.String())
	}
}

// TestLinkWebhookNamesTheProcessGpuadmit: a --webhook-binary of any name
// runs through a link named gpuadmit, which /proc reports as its comm, so
// its CPU lands in the gpuadmit column; a missing binary is an error.
func TestLinkWebhookNamesTheProcessGpuadmit(t *testing.T) {
	dir, logDir := t.TempDir(), t.TempDir()
	bin := filepath.Join(dir, "webhook-2e14333")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := linkWebhook(bin, logDir)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(got) != webhookName {
		t.Errorf("linked as %s, want %s", got, webhookName)
	}
	if target, err := os.Readlink(got); err != nil || target != bin {
		t.Errorf("link %s points to %q (%v), want %s", got, target, err, bin)
	}
	// A --log-dir used before: its link is replaced, and a build already
	// named gpuadmit there is used as it is.
	other := filepath.Join(dir, "webhook-ca1c77a")
	if err := os.WriteFile(other, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := linkWebhook(other, logDir); err != nil {
		t.Errorf("link again into a used log directory: %v", err)
	} else if target, _ := os.Readlink(got); target != other {
		t.Errorf("link points to %q, want the new binary %s", target, other)
	}
	built := filepath.Join(t.TempDir(), webhookName)
	if err := os.WriteFile(built, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := linkWebhook(built, filepath.Dir(built)); err != nil || got != built {
		t.Errorf("a binary already named gpuadmit in the log directory: got %q, %v; want it as it is", got, err)
	}
	if _, err := linkWebhook(filepath.Join(dir, "absent"), t.TempDir()); err == nil {
		t.Error("a missing binary was linked")
	}
}

// TestCPUTotalRoundedOnce: the total per pod comes from the processes'
// seconds, rounded once, not from their figures each rounded to 0.01 ms.
func TestCPUTotalRoundedOnce(t *testing.T) {
	u := CPUUse{procs: map[string]float64{"a": 0.001004, "b": 0.001004, "c": 0.001004, "idle": 0}}
	u.summarise(1)
	if want := map[string]float64{"a": 1, "b": 1, "c": 1}; cmp.Diff(want, u.MsPerPod) != "" {
		t.Errorf("per process %v, want %v", u.MsPerPod, want)
	}
	if u.TotalMsPerPod != 3.01 {
		t.Errorf("total %v ms, want 3.01 (3.012 rounded once; the rounded figures add up to 3.00)", u.TotalMsPerPod)
	}
}
