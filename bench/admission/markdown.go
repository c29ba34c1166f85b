package admission

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// Markdown writes the results table, the server-side table, the targets,
// gpuadmit's memo lookups and the CPU table.
func (r *Report) Markdown(w io.Writer) {
	fmt.Fprintf(w, "Pod mix: %s.\n\n", r.mixDescription())
	fmt.Fprintln(w, "| clients | configuration | pods | errors | mutated | pods/s | p50 ms | p95 ms | p99 ms | max ms | p99 vs noop |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, res := range r.Results {
		fmt.Fprintf(w, "| %d | %s | %d | %d | %d | %.0f | %.1f | %.1f | %.1f | %.1f | %s |\n",
			res.Level, res.Config, res.Pods, res.Errors, res.Mutated, res.Throughput,
			res.Latency.P50Ms, res.Latency.P95Ms, res.Latency.P99Ms, res.Latency.MaxMs, r.versusNoop(res))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| clients | webhook | calls/pod | apiserver mean ms | apiserver p50/p95/p99 ≤ ms | server histogram | server mean ms | server p50/p95/p99 ≤ ms | server p99 est. ms |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---|---|---:|---|---:|")
	for _, res := range r.Results {
		if res.APIServer == nil {
			continue
		}
		a := res.APIServer
		head := fmt.Sprintf("| %d | %s | %.2f | %.2f | %s / %s / %s ", res.Level, res.Config, a.CallsPerPod, a.MeanMs, bound(a.P50LeMs), bound(a.P95LeMs), bound(a.P99LeMs))
		if len(res.Server) == 0 {
			fmt.Fprintln(w, head+"| – | – | – | – |")
		}
		for _, s := range res.Server {
			if s.Count == 0 {
				fmt.Fprintf(w, "%s| %s (%s) | – | none observed | – |\n", head, s.Metric, s.Buckets)
				continue
			}
			est := "–"
			if s.Buckets == "classic" {
				est = fmt.Sprintf("%.2f", s.P99EstMs)
			}
			fmt.Fprintf(w, "%s| %s (%s) | %.2f | %s / %s / %s | %s |\n", head, s.Metric, s.Buckets, s.MeanMs, bound(s.P50LeMs), bound(s.P95LeMs), bound(s.P99LeMs), est)
		}
	}
	fmt.Fprintln(w)
	r.targets(w)
	fmt.Fprintln(w)
	r.memoTable(w)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "CPU milliseconds per created pod, by process (bench: the clients only; gpuadmit, noop-webhook and opa are the webhook servers' own processes):")
	fmt.Fprintln(w)
	r.cpuTable(w)
}

// targets checks the study's targets for gpuadmit at every level: client p99
// within 10% of the no-op webhook's and at or below OPA's, no errors, and a
// server-side review p99 under 2 ms (histogram_quantile's estimate).
func (r *Report) targets(w io.Writer) {
	fmt.Fprintln(w, "| clients | gpuadmit p99 vs noop (≤ +10%) | gpuadmit p99 vs opa (≤ 1.00×) | errors (0) | review p99 est. (< 2 ms) |")
	fmt.Fprintln(w, "|---:|---|---|---|---|")
	for _, level := range r.Settings.Levels {
		g, n, o := r.result(Gpuadmit, level), r.result(Noop, level), r.result(OPA, level)
		if g == nil {
			continue
		}
		vsNoop, vsOPA, review := "–", "–", "–"
		if n != nil && n.Latency.P99Ms > 0 {
			d := 100 * (g.Latency.P99Ms/n.Latency.P99Ms - 1)
			vsNoop = fmt.Sprintf("%+.0f%% %s", d, mark(d <= 10))
		}
		if o != nil && o.Latency.P99Ms > 0 {
			x := g.Latency.P99Ms / o.Latency.P99Ms
			vsOPA = fmt.Sprintf("%.2f× %s", x, mark(x <= 1))
		}
		for _, s := range g.Server {
			if strings.HasPrefix(s.Metric, "gpuadmit_webhook_review_duration_seconds") {
				review = fmt.Sprintf("%.2f ms %s", s.P99EstMs, mark(s.P99EstMs < 2))
			}
		}
		fmt.Fprintf(w, "| %d | %s | %s | %d %s | %s |\n", level, vsNoop, vsOPA, g.Errors, mark(g.Errors == 0), review)
	}
}

// mixDescription says what the pod mix was.
func (r *Report) mixDescription() string {
	switch r.Settings.Mix {
	case MixTemplate:
		return "template (every pod alike, as one controller's pods)"
	case MixDistinct:
		return fmt.Sprintf("distinct (%d shapes in turn, each pod with a toleration of its own: no two alike to the policy)", r.Settings.PodShapes)
	case MixLabeled:
		return "labeled (every pod alike but for a label of its own, which the default policies do not read)"
	}
	return fmt.Sprintf("shapes (%d pod shapes in turn)", r.Settings.PodShapes)
}

// memoTable writes gpuadmit's decision memo lookups at every level.
func (r *Report) memoTable(w io.Writer) {
	fmt.Fprintln(w, "| clients | gpuadmit memo hits | misses (policy evaluations) | hit rate |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|")
	for _, res := range r.Results {
		if res.Memo == nil {
			continue
		}
		rate := "–"
		if n := res.Memo.Hits + res.Memo.Misses; n > 0 {
			rate = fmt.Sprintf("%.0f%%", 100*res.Memo.Hits/n)
		}
		fmt.Fprintf(w, "| %d | %.0f | %.0f | %s |\n", res.Level, res.Memo.Hits, res.Memo.Misses, rate)
	}
}

func mark(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

// cpuTable writes CPU milliseconds per pod by process, and the other users' load.
func (r *Report) cpuTable(w io.Writer) {
	procs := map[string]bool{}
	for _, res := range r.Results {
		for p := range res.CPU.MsPerPod {
			procs[p] = true
		}
	}
	names := slices.Sorted(maps.Keys(procs))
	fmt.Fprintf(w, "| clients | configuration | %s | total | Events posted per pod | other users' CPUs busy |\n", strings.Join(names, " | "))
	fmt.Fprintf(w, "|---:|---|%s---:|---:|---:|\n", strings.Repeat("---:|", len(names)))
	for _, res := range r.Results {
		var total float64
		fmt.Fprintf(w, "| %d | %s |", res.Level, res.Config)
		for _, p := range names {
			total += res.CPU.MsPerPod[p]
			fmt.Fprintf(w, " %.2f |", res.CPU.MsPerPod[p])
		}
		fmt.Fprintf(w, " %.2f | %.2f | %.2f |\n", total, res.PostsPerPod["events"], res.CPU.OtherCores)
	}
}

// versusNoop is the result's client p99 relative to the no-op webhook's at the same level.
func (r *Report) versusNoop(res Result) string {
	for _, o := range r.Results {
		if o.Config == Noop && o.Level == res.Level && o.Latency.P99Ms > 0 && res.Config != Noop {
			return fmt.Sprintf("%+.0f%%", 100*(res.Latency.P99Ms/o.Latency.P99Ms-1))
		}
	}
	return "–"
}

func bound(v float64) string {
	if v < 0 {
		return "+Inf"
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
}
