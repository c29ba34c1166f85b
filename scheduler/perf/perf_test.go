package perf

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	_ "k8s.io/component-base/logs/json/register" // the harness's -logging-format=json
	"k8s.io/dynamic-resource-allocation/structured"
	benchmark "k8s.io/kubernetes/test/integration/scheduler_perf"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"
)

// topic names the harness's result files.
const topic = "gpuadmit"

func TestMain(m *testing.M) {
	if isEtcdShim() {
		if err := runEtcdShim(); err != nil {
			fmt.Fprintln(os.Stderr, "etcd shim:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The harness's flags (-perf-scheduling-label-filter, -data-items-dir,
	// -v, ...), then the tests' own.
	if err := benchmark.InitTests(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := trimmedFixtures(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if shimDir != "" {
		_ = os.RemoveAll(shimDir)
	}
	os.Exit(code)
}

// BenchmarkPerfSchedulingGPUAdmit runs the workload of configFile in the
// harness, the test cases (scheduler configurations) in turn for each
// workload it selects, and reports per run the harness's throughput and
// attempt duration beside GPUAdmit's Score calls and time per cycle; a
// GPUAdmit run with no Score call fails. The table goes to the log and to
// gpuadmit-report.md in -data-items-dir (a new temporary directory when
// unset). -bench selects runs by name:
// BenchmarkPerfSchedulingGPUAdmit/<configuration>/<workload>.
func BenchmarkPerfSchedulingGPUAdmit(b *testing.B) {
	if err := findEtcd(); err != nil {
		b.Fatal(err)
	}
	dir, err := dataItemsDir()
	if err != nil {
		b.Fatal(err)
	}
	if os.Getenv("ARTIFACTS") == "" {
		// Each run's log goes to a file of its own, deleted when it
		// passes, instead of into the benchmark's output.
		b.Setenv("ARTIFACTS", dir)
	}
	rows, err := runHarness(b, dir, 0)
	if err != nil {
		b.Fatal(err)
	}
	table := markdown(rows)
	b.Logf("results (%s):\n%s", dir, table)
	if err := os.WriteFile(filepath.Join(dir, "gpuadmit-report.md"), []byte(table), 0o644); err != nil {
		b.Error(err)
	}
	for _, r := range rows {
		if why := r.invalid(); why != "" {
			b.Errorf("%s is invalid: %s", r.run, why)
		}
	}
}

// TestSmoke runs the shipped configuration on the smallest workload (50
// nodes, 20 pods to fill, 20 measured) and checks that every pod is
// scheduled and that GPUAdmit scored them. It needs etcd; without it the
// test skips, unless GPUADMIT_REQUIRE_TOOLS=1.
func TestSmoke(t *testing.T) {
	if err := findEtcd(); err != nil {
		if os.Getenv("GPUADMIT_REQUIRE_TOOLS") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	dir := t.TempDir()
	t.Setenv("ARTIFACTS", dir) // a failed run's log stays there
	filter, items := benchmark.PerfSchedulingLabelFilter, flag.Lookup("data-items-dir")
	old := items.Value.String()
	benchmark.PerfSchedulingLabelFilter = "smoke,shipped"
	if err := items.Value.Set(dir); err != nil {
		t.Fatal(err)
	}
	defer func() {
		benchmark.PerfSchedulingLabelFilter = filter
		_ = items.Value.Set(old)
	}()
	var rows []row
	var err error
	failed := false
	// The harness runs out-of-tree plugins only as a benchmark.
	testing.Benchmark(func(b *testing.B) {
		rows, err = runHarness(b, dir, time.Minute)
		failed = b.Failed()
	})
	if failed || err != nil {
		t.Errorf("the harness failed (err %v); its logs:\n%s", err, logs(dir))
	}
	if len(rows) != 1 {
		t.Fatalf("%d runs, want the one smoke run: %+v", len(rows), rows)
	}
	// Under testing.Benchmark sub-benchmarks have no names of their own,
	// so the run is not known by name: the filter selects one run, the
	// shipped GPUAdmit configuration.
	r := rows[0]
	r.gpuadmit = true
	t.Logf("%q: %d pods, %d cycles, %d GPUAdmit Score calls (%d scored), %.1f pods/s", r.run, r.pods, r.cycles, r.scoreCalls, r.scored, r.throughput)
	if r.pods != 20 {
		t.Errorf("GPUAdmit saw %d measured pods, want 20", r.pods)
	}
	if why := r.invalid(); why != "" {
		t.Error(why)
	}
}

// runHarness runs configFile under the harness, whose result file goes to
// dir, and returns a row per workload run. A positive timeout bounds each
// wait for pods to be scheduled.
func runHarness(b *testing.B, dir string, timeout time.Duration) ([]row, error) {
	// The allocator the harness benchmarks DRA with (dra_test.go).
	structured.EnableAllocators("incubating")
	defer structured.EnableAllocators()
	r := newRuns()
	opts := []benchmark.SchedulerPerfOption{benchmark.WithPreRunFn(func(tCtx ktesting.TContext, _ *benchmark.Workload) (func(), error) {
		r.begin(tCtx.TB().Name())
		return nil, nil
	})}
	if timeout > 0 {
		opts = append(opts, benchmark.WithPodsSchedulingTimeout(timeout))
	}
	start := time.Now()
	benchmark.RunBenchmarkPerfScheduling(b, configFile, topic, r.registry(), opts...)
	items, _, err := readItems(dir, topic, start)
	if err != nil {
		return nil, err
	}
	var rows []row
	for _, name := range runNames(items) {
		row := makeRow(name, r.get(name), items)
		for _, tc := range testCases {
			row.gpuadmit = row.gpuadmit || strings.Contains(name, "/"+tc.Name+"/") && tc.Scheduler == "gpuadmit-scheduler"
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// dataItemsDir is the harness's -data-items-dir, set to a new temporary
// directory when unset, so that result files do not land in the source tree.
func dataItemsDir() (string, error) {
	f := flag.Lookup("data-items-dir")
	if f == nil {
		return "", errors.New("the harness has no -data-items-dir flag")
	}
	if f.Value.String() != "" {
		return f.Value.String(), nil
	}
	dir, err := os.MkdirTemp("", "gpuadmit-schedperf-")
	if err != nil {
		return "", err
	}
	return dir, f.Value.Set(dir)
}

// findEtcd puts etcd on PATH for the harness: the one make test installs
// beside the control plane (test/e2e/.bin), else any on PATH; behind the
// shim where it is etcd 3.4 (see etcdShim).
func findEtcd() error {
	etcd, err := filepath.Abs("../../test/e2e/.bin/v1.37.0/etcd")
	if err == nil {
		_, err = os.Stat(etcd)
	}
	if err != nil {
		if etcd, err = exec.LookPath("etcd"); err != nil {
			return fmt.Errorf("the harness runs etcd, and there is none on PATH or in test/e2e/.bin/v1.37.0 (hack/e2e-binaries.sh links it): %w", err)
		}
	}
	if err := os.Setenv("PATH", filepath.Dir(etcd)+string(os.PathListSeparator)+os.Getenv("PATH")); err != nil {
		return err
	}
	return etcdShim(etcd)
}

// logs are the harness's per-run logs left in dir (those of failed runs).
func logs(dir string) string {
	paths, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	var b strings.Builder
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(raw)
		if len(s) > 20000 {
			s = "…" + s[len(s)-20000:]
		}
		fmt.Fprintf(&b, "== %s\n%s\n", filepath.Base(p), s)
	}
	return b.String()
}

// trimmedFixtures lets the harness's API server find its certificate
// fixtures in a binary built with -trimpath, as make test builds every
// test. Kubernetes' test server (cmd/kube-apiserver/app/testing) finds
// them by its own source path, which -trimpath leaves relative
// ("k8s.io/kubernetes@v1.37.0/…"), and then accepts only bazel's
// TEST_SRCDIR and TEST_WORKSPACE to make it absolute; relative to the
// module cache it is the package's directory, so these name the module
// cache. Without -trimpath, or with the variables set, nothing changes.
func trimmedFixtures() error {
	if _, file, _, ok := runtime.Caller(0); !ok || filepath.IsAbs(file) || os.Getenv("TEST_SRCDIR") != "" {
		return nil
	}
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return fmt.Errorf("built with -trimpath, so the API server's fixtures are found in the module cache: go env GOMODCACHE: %w", err)
	}
	if err := os.Setenv("TEST_SRCDIR", strings.TrimSpace(string(out))); err != nil {
		return err
	}
	return os.Setenv("TEST_WORKSPACE", ".")
}
