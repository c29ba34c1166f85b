package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuadmit/gpuadmit/bench/packing"
)

// studyFlags are the flags of `gpuadmit-bench study`, as given.
type studyFlags struct {
	trace, checksums, workloads, policies, seeds, out string
	results                                           string // report these instead of running
	workers                                           int
}

// defaultStudyWorkloads are all the trace's pod lists.
var defaultStudyWorkloads = strings.Join(packing.PodLists, ",")

func studyCmd() *cobra.Command {
	f := studyFlags{trace: "../../shared/data/openb", workloads: defaultStudyWorkloads, policies: "all",
		seeds: "42-51", out: filepath.Join(os.TempDir(), "gpuadmit-bench", "packing"), workers: 1}
	cmd := &cobra.Command{
		Use:   "study --trace DIR --workloads A,B --policies all --seeds 42-51 --workers 1 --out DIR",
		Short: "Run the packing study for every workload, policy and seed and write its report",
		Long: "Run `gpuadmit-bench packing` for every workload, policy and seed, then write into --out the raw\n" +
			"results (results.json), their summary over seeds (summary.json, summary.md) and plots\n" +
			"(<workload>.png, at100.png), and print summary.md. Progress goes to stderr. The trace files\n" +
			"are checked against --checksums first (docs/trace.md).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runStudy(cmd.Context(), f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.trace, "trace", f.trace, "openb trace directory (relative to the working directory)")
	fl.StringVar(&f.checksums, "checksums", "", checksumsUsage)
	fl.StringVar(&f.workloads, "workloads", f.workloads, "comma-separated pod lists: default, gpushare40, multigpu20, … or file names")
	fl.StringVar(&f.policies, "policies", f.policies, "comma-separated policies, or all: "+strings.Join(packing.Policies, ", ")+
		"; variants, run only when named: "+strings.Join(packing.Variants, ", "))
	fl.StringVar(&f.seeds, "seeds", f.seeds, "seeds: comma-separated numbers and ranges (42-51, 42,45)")
	fl.IntVar(&f.workers, "workers", f.workers, "runs at a time; more than one makes runs compete for CPU and inflates the decision times")
	fl.StringVar(&f.out, "out", f.out, "directory for results.json, summary.json, summary.md and the PNGs")
	fl.StringVar(&f.results, "results", "", "report the runs of an earlier study's results.json that match --workloads, --policies and --seeds, without running any")
	return cmd
}

func runStudy(ctx context.Context, f studyFlags, stdout, stderr io.Writer) error {
	workloads, err := parseList("--workloads", f.workloads)
	if err != nil {
		return err
	}
	policies, err := parsePolicies(f.policies)
	if err != nil {
		return err
	}
	seeds, err := parseSeeds(f.seeds)
	if err != nil {
		return err
	}
	if f.workers < 1 {
		return fmt.Errorf("--workers %d: want at least 1", f.workers)
	}
	if f.results != "" {
		if err := notOverwritten(f.results, f.out); err != nil {
			return err
		}
		results, err := readResults(f.results, workloads, policies, seeds)
		if err != nil {
			return err
		}
		return writeStudy(f.out, results, stdout)
	}
	if err := verifyTrace(f.trace, f.checksums, packing.TraceFiles("", workloads...)); err != nil {
		return err
	}
	start := time.Now()
	results, err := runMatrix(ctx, f.trace, workloads, policies, seeds, f.workers, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%d runs in %s\n", len(results), time.Since(start).Round(time.Second))
	return writeStudy(f.out, results, stdout)
}

// writeStudy writes the report of results into out and prints summary.md.
func writeStudy(out string, results []packing.Result, stdout io.Writer) error {
	md, err := packing.WriteReport(out, results)
	if err != nil {
		return err
	}
	_, err = io.WriteString(stdout, md)
	return err
}

// notOverwritten refuses a report into out that would replace results,
// the file it reads: the runs it leaves out would be lost.
func notOverwritten(results, out string) error {
	in, err := os.Stat(results)
	if err != nil {
		return fmt.Errorf("--results: %w", err)
	}
	if o, err := os.Stat(filepath.Join(out, "results.json")); err == nil && os.SameFile(in, o) {
		return fmt.Errorf("--results %s is the results.json --out %s would write; give another --out", results, out)
	}
	return nil
}

// readResults reads an earlier study's results.json and keeps the runs of
// the given workloads, policies and seeds, in their order there.
func readResults(path string, workloads, policies []string, seeds []uint64) ([]packing.Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--results: %w", err)
	}
	var all []packing.Result
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, fmt.Errorf("--results %s: %w", path, err)
	}
	var out []packing.Result
	for _, r := range all {
		if slices.Contains(workloads, r.Workload) && slices.Contains(policies, r.Policy) && slices.Contains(seeds, r.Seed) {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--results %s: no run of the workloads, policies and seeds asked for", path)
	}
	return out, nil
}

// runMatrix is packing.RunMatrix, given up on when ctx is done (Ctrl-C)
// so that the process can exit without waiting for the runs under way.
func runMatrix(ctx context.Context, trace string, workloads, policies []string, seeds []uint64, workers int, progress io.Writer) ([]packing.Result, error) {
	type outcome struct {
		results []packing.Result
		err     error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := packing.RunMatrix(trace, workloads, policies, seeds, workers, progress)
		done <- outcome{r, err}
	}()
	select {
	case o := <-done:
		return o.results, o.err
	case <-ctx.Done():
		return nil, fmt.Errorf("study interrupted: %w", context.Cause(ctx))
	}
}

// parseList splits a comma-separated flag value into its items, refusing
// empty and repeated items.
func parseList(flag, value string) ([]string, error) {
	var out []string
	for item := range strings.SplitSeq(value, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, fmt.Errorf("%s %q: empty item", flag, value)
		}
		if slices.Contains(out, item) {
			return nil, fmt.Errorf("%s %q: %s listed twice", flag, value, item)
		}
		out = append(out, item)
	}
	return out, nil
}

// parsePolicies reads --policies: "all" is every policy of packing.Policies;
// the variants (packing.Variants) run only when named.
func parsePolicies(value string) ([]string, error) {
	if strings.TrimSpace(value) == "all" {
		return slices.Clone(packing.Policies), nil
	}
	names, err := parseList("--policies", value)
	if err != nil {
		return nil, err
	}
	known := append(slices.Clone(packing.Policies), packing.Variants...)
	for _, n := range names {
		if !slices.Contains(known, n) {
			return nil, fmt.Errorf("--policies %q: unknown policy %q (known: all, %s)", value, n, strings.Join(known, ", "))
		}
	}
	return names, nil
}

// parseSeeds reads --seeds: comma-separated seeds and inclusive ranges
// ("42-51", "42,45", "42-44,50"), each seed once.
func parseSeeds(value string) ([]uint64, error) {
	items, err := parseList("--seeds", value)
	if err != nil {
		return nil, err
	}
	var seeds []uint64
	seen := map[uint64]bool{}
	for _, item := range items {
		from, to, err := seedRange(item)
		if err != nil {
			return nil, fmt.Errorf("--seeds %q: %w", value, err)
		}
		for k := range to - from + 1 {
			s := from + k
			if seen[s] {
				return nil, fmt.Errorf("--seeds %q: seed %d listed twice", value, s)
			}
			seen[s] = true
			seeds = append(seeds, s)
		}
	}
	return seeds, nil
}

// seedRange reads "N" or "A-B" (A ≤ B).
func seedRange(item string) (from, to uint64, err error) {
	lo, hi, isRange := strings.Cut(item, "-")
	if from, err = strconv.ParseUint(strings.TrimSpace(lo), 10, 64); err != nil {
		return 0, 0, fmt.Errorf("%q is not a seed or a range A-B of seeds", item)
	}
	if !isRange {
		return from, from, nil
	}
	if to, err = strconv.ParseUint(strings.TrimSpace(hi), 10, 64); err != nil || to < from {
		return 0, 0, fmt.Errorf("%q is not a seed or a range A-B of seeds", item)
	}
	if to-from >= 10000 {
		return 0, 0, fmt.Errorf("range %q has more than 10000 seeds", item)
	}
	return from, to, nil
}
