package packing

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// RunMatrix runs the study for every workload, policy and seed, at most
// workers at a time (at least one), and returns the results ordered by
// workload, policy, seed as the arguments list them. It checks every
// workload and policy before the first run, so a typo fails at once rather
// than after the runs before it; it stops at the first failed run. When
// progress is not nil it gets one line per finished run.
func RunMatrix(trace string, workloads, policies []string, seeds []uint64, workers int, progress io.Writer) ([]Result, error) {
	if len(workloads) == 0 || len(policies) == 0 || len(seeds) == 0 {
		return nil, fmt.Errorf("nothing to run: %d workloads, %d policies, %d seeds", len(workloads), len(policies), len(seeds))
	}
	if err := checkMatrix(trace, workloads, policies); err != nil {
		return nil, err
	}
	studies := matrix(trace, workloads, policies, seeds)
	results := make([]Result, len(studies))
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(max(workers, 1))
	var mu sync.Mutex
	done := 0
	for i, s := range studies {
		g.Go(func() error {
			if ctx.Err() != nil {
				return nil // another run failed; its error is the one returned
			}
			start := time.Now()
			res, err := RunStudy(s)
			if err != nil {
				return fmt.Errorf("%s/%s/seed %d: %w", s.Workload, s.Policy, s.Seed, err)
			}
			results[i] = res
			if progress != nil {
				mu.Lock()
				done++
				fmt.Fprintf(progress, "[%d/%d] %s %s seed %d: %s\n", done, len(studies),
					s.Workload, s.Policy, s.Seed, time.Since(start).Round(10*time.Millisecond))
				mu.Unlock()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return results, nil
}

// checkMatrix loads the cluster and every workload once and builds every
// policy (for the first workload), failing on the first that cannot be.
func checkMatrix(trace string, workloads, policies []string) error {
	nodes, err := LoadNodes(trace, "")
	if err != nil {
		return fmt.Errorf("load cluster: %w", err)
	}
	var first []Pod
	for i, w := range workloads {
		pods, err := LoadPods(trace, w)
		if err != nil {
			return fmt.Errorf("load workload %s: %w", w, err)
		}
		if i == 0 {
			first = pods
		}
	}
	for _, p := range policies {
		if _, err := NewPolicy(p, first, nodes); err != nil {
			return err
		}
	}
	return nil
}

func matrix(trace string, workloads, policies []string, seeds []uint64) []Study {
	var out []Study
	for _, w := range workloads {
		for _, p := range policies {
			for _, seed := range seeds {
				out = append(out, Study{Trace: trace, Workload: w, Policy: p, Seed: seed})
			}
		}
	}
	return out
}

// Summary is one (workload, policy) of a study over its seeds.
type Summary struct {
	Workload string   `json:"workload"`
	Policy   string   `json:"policy"`
	Seeds    []uint64 `json:"seeds"`
	// Points are the arrival points, ascending, each over the seeds that reached it.
	Points []PointSummary `json:"points"`
	// DecisionP50us and DecisionP99us are the means of the per-seed
	// percentiles; DecisionP99MaxUs is the largest per-seed p99.
	DecisionP50us    float64 `json:"decisionP50us"`
	DecisionP99us    float64 `json:"decisionP99us"`
	DecisionP99MaxUs float64 `json:"decisionP99MaxUs"`
	// At100BySeed is each seed's unallocated GPU % at 100% arrived, for
	// comparing policies seed by seed (Margins).
	At100BySeed map[uint64]float64 `json:"unallocatedAt100PctBySeed,omitempty"`
}

// PointSummary is one arrival point over the seeds.
type PointSummary struct {
	Arrived     float64 `json:"arrived"`
	Runs        int     `json:"runs"`
	Unallocated Stat    `json:"unallocatedPct"`
	Allocated   Stat    `json:"allocatedPct"`
}

// Stat describes a sample: its mean, median (the mean of the middle two
// when the sample is even), least and greatest value.
type Stat struct {
	Mean   float64 `json:"mean"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// Summarize groups results by workload and policy, in the order each pair
// first appears, and describes each group over its seeds.
func Summarize(results []Result) []Summary {
	type key struct{ workload, policy string }
	var order []key
	groups := map[key][]Result{}
	for _, r := range results {
		k := key{r.Workload, r.Policy}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	out := make([]Summary, 0, len(order))
	for _, k := range order {
		out = append(out, summarize(k.workload, k.policy, groups[k]))
	}
	return out
}

func summarize(workload, policy string, runs []Result) Summary {
	s := Summary{Workload: workload, Policy: policy}
	var p50, p99 []float64
	for _, r := range runs {
		s.Seeds = append(s.Seeds, r.Seed)
		p50 = append(p50, r.DecisionP50us)
		p99 = append(p99, r.DecisionP99us)
		for _, p := range r.Points {
			if permille(p.Arrived) == 1000 {
				if s.At100BySeed == nil {
					s.At100BySeed = map[uint64]float64{}
				}
				s.At100BySeed[r.Seed] = p.UnallocatedPct
			}
		}
	}
	s.DecisionP50us = describe(p50).Mean
	s.DecisionP99us = describe(p99).Mean
	s.DecisionP99MaxUs = describe(p99).Max
	s.Points = summarizePoints(runs)
	return s
}

// summarizePoints describes each arrival point over the runs that reached
// it; points are matched to the permille, so float noise does not split them.
func summarizePoints(runs []Result) []PointSummary {
	unalloc, alloc := map[int64][]float64{}, map[int64][]float64{}
	for _, r := range runs {
		for _, p := range r.Points {
			k := permille(p.Arrived)
			unalloc[k] = append(unalloc[k], p.UnallocatedPct)
			alloc[k] = append(alloc[k], p.AllocatedPct)
		}
	}
	var out []PointSummary
	for _, k := range slices.Sorted(maps.Keys(unalloc)) {
		out = append(out, PointSummary{Arrived: float64(k) / 1000, Runs: len(unalloc[k]),
			Unallocated: describe(unalloc[k]), Allocated: describe(alloc[k])})
	}
	return out
}

// permille is a point's arrived share in thousandths, by which points of
// different runs are matched, so float noise does not split them.
func permille(arrived float64) int64 { return int64(math.Round(arrived * 1000)) }

// describe returns the Stat of xs; the zero Stat when xs is empty.
func describe(xs []float64) Stat {
	if len(xs) == 0 {
		return Stat{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	n := len(s)
	median := s[n/2]
	if n%2 == 0 {
		median = (s[n/2-1] + s[n/2]) / 2
	}
	return Stat{Mean: sum / float64(n), Median: median, Min: s[0], Max: s[n-1]}
}

// At returns the point at arrived (a fraction of capacity, 1 for 100%).
func (s Summary) At(arrived float64) (PointSummary, bool) {
	for _, p := range s.Points {
		if math.Abs(p.Arrived-arrived) < 1e-6 {
			return p, true
		}
	}
	return PointSummary{}, false
}

// WriteReport writes results.json (results as they are), summary.json,
// summary.md and the plots into dir, creating it, and returns summary.md.
func WriteReport(dir string, results []Result) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	sums := Summarize(results)
	md := Markdown(sums)
	if err := writeJSON(filepath.Join(dir, "results.json"), results); err != nil {
		return "", err
	}
	if err := writeJSON(filepath.Join(dir, "summary.json"), sums); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.md"), []byte(md), 0o644); err != nil {
		return "", fmt.Errorf("write summary: %w", err)
	}
	if err := WritePlots(dir, sums); err != nil {
		return "", err
	}
	return md, nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// paperAt100Pct is the FGD paper's unallocated GPU % at 100% arrived, the
// mean over seeds 42–51, per pod list and policy (in paperPolicies'
// order): 100 minus column "100" of the artifact's
// experiments/analysis/expected_results/analysis_allo_discrete.csv
// (hkust-adsl/kubernetes-scheduler-simulator), the per-seed results its
// figures are drawn from. The artifact has 17 of the 24 lists.
var paperAt100Pct = map[string][6]float64{
	"default":     {13.70, 9.38, 8.35, 8.22, 7.14, 4.77},
	"cpu050":      {10.98, 6.97, 6.48, 6.54, 6.44, 5.00},
	"cpu100":      {12.57, 8.27, 7.58, 7.50, 6.74, 4.79},
	"cpu200":      {16.97, 12.55, 10.33, 10.02, 7.85, 5.18},
	"cpu250":      {20.00, 16.43, 12.25, 11.95, 8.79, 6.80},
	"gpushare40":  {15.14, 10.70, 10.24, 10.23, 8.56, 6.04},
	"gpushare60":  {17.19, 13.18, 13.10, 12.85, 10.94, 8.75},
	"gpushare80":  {19.38, 15.86, 15.50, 15.35, 13.34, 10.92},
	"gpushare100": {21.10, 18.02, 17.77, 17.87, 15.38, 13.36},
	"gpuspec10":   {13.74, 9.83, 8.04, 7.76, 6.90, 5.34},
	"gpuspec20":   {14.10, 11.71, 10.89, 10.72, 11.54, 5.34},
	"gpuspec25":   {14.58, 14.56, 13.59, 13.23, 14.33, 6.09},
	"gpuspec33":   {16.13, 20.18, 18.91, 17.78, 19.61, 12.16},
	"multigpu20":  {13.08, 8.15, 6.66, 6.50, 6.27, 4.47},
	"multigpu30":  {13.37, 6.89, 5.45, 5.30, 5.43, 3.64},
	"multigpu40":  {14.62, 5.96, 4.65, 4.41, 4.90, 3.09},
	"multigpu50":  {18.72, 5.27, 4.31, 3.94, 4.38, 2.91},
}

// paperPolicies are the policies of paperAt100Pct, in its order.
var paperPolicies = [6]string{"random", "dotprod", "clustering", "packing", "bestfit", "fgd"}

// paperAt100 is the paper's unallocated GPU % at 100% arrived for policy on
// workload; ok is false where the paper has none.
func paperAt100(workload, policy string) (pct float64, ok bool) {
	row, ok := paperAt100Pct[workload]
	if !ok {
		return 0, false
	}
	for i, p := range paperPolicies {
		if p == policy {
			return row[i], true
		}
	}
	return 0, false
}

// Markdown renders sums as one table per workload, in the order workloads
// first appear, rows in the order of Policies (others after, as they
// appear); a workload the paper has compares with it.
func Markdown(sums []Summary) string {
	var b strings.Builder
	b.WriteString("# Packing study: GPU left unallocated by arrived workload\n\n")
	b.WriteString("The packing study of the FGD paper (Weng et al., USENIX ATC'23) replayed on the Alibaba openb\n" +
		"trace by bench/packing (its doc.go has the protocol): each workload is inflated to 130% of the\n" +
		"cluster's GPU capacity and shuffled by the seed; pods arrive one by one and never leave.\n\n")
	b.WriteString("Unallocated GPU is the % of GPU capacity not allocated when the GPU asked for by the pods\n" +
		"arrived so far first reaches the given % of capacity (the ideal is 100 − arrived, 0 from 100%\n" +
		"on). The 100% columns give the mean, median and min–max over seeds, the others the mean.\n" +
		"Decision time is per pod (score every node, choose, place): the mean over seeds of each run's\n" +
		"p50 and p99, and the largest p99 of any seed, on the machine that ran the study (one run at a\n" +
		"time unless --workers says otherwise), so compare it within a table, not across machines.\n" +
		"Paper @100%: the FGD artifact's own results (experiments/analysis/expected_results, seeds\n" +
		"42–51), which its figures are drawn from; it has 17 of the 24 lists.\n\n")
	fmt.Fprintf(&b, "Seeds: %s.\n", seedList(sums))
	if ms := Margins(sums, "gpuadmit", "fgd"); len(ms) > 0 {
		writeMargins(&b, ms)
	}
	for _, w := range workloadsOf(sums) {
		fmt.Fprintf(&b, "\n## %s\n\n", w)
		_, paper := paperAt100Pct[w]
		writeTable(&b, paper, rowsOf(sums, w))
	}
	return b.String()
}

func writeTable(b *strings.Builder, paper bool, rows []Summary) {
	b.WriteString("| policy | unallocated @100% mean | median | min–max | @90% | @110% | @130% | decision p50 µs | p99 µs | p99 max µs |")
	if paper {
		b.WriteString(" paper @100% | Δ vs paper (pp) |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", 9))
	if paper {
		b.WriteString("---:|---:|")
	}
	b.WriteString("\n")
	for _, s := range rows {
		at100, ok := s.At(1)
		u := at100.Unallocated
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %.1f | %.1f | %.1f |", s.Policy,
			pct(u.Mean, ok), pct(u.Median, ok), pctRange(u, ok),
			meanAt(s, 0.9), meanAt(s, 1.1), meanAt(s, 1.3),
			s.DecisionP50us, s.DecisionP99us, s.DecisionP99MaxUs)
		if paper {
			b.WriteString(paperCells(s.Workload, s.Policy, u.Mean, ok))
		}
		b.WriteString("\n")
	}
}

func paperCells(workload, policy string, mean float64, ok bool) string {
	want, known := paperAt100(workload, policy)
	if !known {
		return "  |  |"
	}
	if !ok {
		return fmt.Sprintf(" %.2f | – |", want)
	}
	return fmt.Sprintf(" %.2f | %+.2f |", want, mean-want)
}

func meanAt(s Summary, arrived float64) string {
	p, ok := s.At(arrived)
	return pct(p.Unallocated.Mean, ok)
}

func pct(v float64, ok bool) string {
	if !ok {
		return "–"
	}
	return fmt.Sprintf("%.2f", v)
}

func pctRange(st Stat, ok bool) string {
	if !ok {
		return "–"
	}
	return fmt.Sprintf("%.2f–%.2f", st.Min, st.Max)
}

func workloadsOf(sums []Summary) []string {
	var out []string
	for _, s := range sums {
		if !slices.Contains(out, s.Workload) {
			out = append(out, s.Workload)
		}
	}
	return out
}

// rowsOf returns the summaries of workload w, in the order of Policies,
// then the others in their order.
func rowsOf(sums []Summary, w string) []Summary {
	var rows []Summary
	for _, s := range sums {
		if s.Workload == w {
			rows = append(rows, s)
		}
	}
	slices.SortStableFunc(rows, func(a, b Summary) int { return policyRank(a.Policy) - policyRank(b.Policy) })
	return rows
}

// policyRank orders policies as Policies lists them, the others after.
func policyRank(policy string) int {
	if i := slices.Index(Policies, policy); i >= 0 {
		return i
	}
	return len(Policies)
}

// seedList names the seeds of sums, "42–51" when they are a run of
// consecutive numbers, and how many each row has when that varies.
func seedList(sums []Summary) string {
	var seeds []uint64
	counts := map[int]bool{}
	perRow := 0
	for _, s := range sums {
		counts[len(s.Seeds)] = true
		perRow = len(s.Seeds)
		for _, seed := range s.Seeds {
			if !slices.Contains(seeds, seed) {
				seeds = append(seeds, seed)
			}
		}
	}
	slices.Sort(seeds)
	var list string
	switch {
	case len(seeds) == 0:
		return "none"
	case len(seeds) > 2 && seeds[len(seeds)-1]-seeds[0] == uint64(len(seeds)-1):
		list = fmt.Sprintf("%d–%d", seeds[0], seeds[len(seeds)-1])
	default:
		list = strings.Trim(strings.ReplaceAll(fmt.Sprint(seeds), " ", ", "), "[]")
	}
	if len(counts) > 1 {
		return list + " (not every row has every seed)"
	}
	return fmt.Sprintf("%s (%d per row)", list, perRow)
}

// Margin is how much less GPU one policy leaves unallocated at 100%
// arrived than another on one workload, over the seeds both ran.
type Margin struct {
	Workload string
	// Policy and Against are the two policies' unallocated GPU % at 100%
	// arrived over the common seeds.
	Policy, Against Stat
	// Diff is Policy's minus Against's, seed by seed (negative: Policy
	// leaves less); Wins counts the seeds where it is negative.
	Diff       Stat
	Wins, Runs int
}

// Margins compares policy with against on every workload both ran, in
// the order workloads first appear, seed by seed.
func Margins(sums []Summary, policy, against string) []Margin {
	var out []Margin
	for _, w := range workloadsOf(sums) {
		var a, b *Summary
		for i := range sums {
			switch {
			case sums[i].Workload != w:
			case sums[i].Policy == policy:
				a = &sums[i]
			case sums[i].Policy == against:
				b = &sums[i]
			}
		}
		if a == nil || b == nil {
			continue
		}
		var xs, ys, ds []float64
		m := Margin{Workload: w}
		for _, seed := range slices.Sorted(maps.Keys(a.At100BySeed)) {
			y, ok := b.At100BySeed[seed]
			if !ok {
				continue
			}
			x := a.At100BySeed[seed]
			xs, ys, ds = append(xs, x), append(ys, y), append(ds, x-y)
			if x < y {
				m.Wins++
			}
		}
		if len(ds) == 0 {
			continue
		}
		m.Policy, m.Against, m.Diff, m.Runs = describe(xs), describe(ys), describe(ds), len(ds)
		out = append(out, m)
	}
	return out
}

// Spread says whether m's margin stands clear of the spread over seeds:
// "apart" when the two policies' ranges over seeds do not meet, "every
// seed" when they meet but the policy is lower on every seed, "inside"
// otherwise; "(worse)" is added where the policy is the higher one.
func (m Margin) Spread() string {
	switch {
	case m.Policy.Max < m.Against.Min:
		return "apart"
	case m.Policy.Min > m.Against.Max:
		return "apart (worse)"
	case m.Wins == m.Runs:
		return "every seed"
	case m.Wins == 0 && m.Diff.Min > 0:
		return "every seed (worse)"
	}
	return "inside"
}

func writeMargins(b *strings.Builder, ms []Margin) {
	b.WriteString("\n## gpuadmit against FGD at 100% arrived\n\n")
	b.WriteString("Margin: gpuadmit's unallocated GPU % minus FGD's, the mean over the seeds both ran (negative:\n" +
		"gpuadmit leaves less); per seed: the least and greatest of the seed-by-seed differences. Spread:\n" +
		"\"apart\" when the two policies' ranges over seeds do not meet, \"every seed\" when they meet but\n" +
		"gpuadmit is lower on every seed, \"inside\" when the margin is within the spread over seeds;\n" +
		"\"(worse)\" where gpuadmit is the higher.\n\n")
	b.WriteString("| workload | fgd mean | min–max | gpuadmit mean | min–max | margin (pp) | per seed | seeds lower | spread |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, m := range ms {
		fmt.Fprintf(b, "| %s | %.2f | %s | %.2f | %s | %+.2f | %+.2f…%+.2f | %d/%d | %s |\n", m.Workload,
			m.Against.Mean, pctRange(m.Against, true), m.Policy.Mean, pctRange(m.Policy, true),
			m.Diff.Mean, m.Diff.Min, m.Diff.Max, m.Wins, m.Runs, m.Spread())
	}
}
