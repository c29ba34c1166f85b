package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuadmit/gpuadmit/bench/packing"
)

// syntheticTrace writes a two-node cluster and a workload "test" with its
// sha256sum file, and returns the directory and that file.
func syntheticTrace(t *testing.T) (dir, sums string) {
	t.Helper()
	dir = t.TempDir()
	files := map[string]string{
		packing.NodeFile:        "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,4,P100\nn1,64000,262144,4,P100\n",
		packing.PodFile("test"): "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\np0,4000,8192,1,500,,LS\np1,8000,16384,2,1000,,LS\n",
	}
	var list strings.Builder
	for name, body := range files {
		sum := sha256.Sum256([]byte(body))
		list.WriteString(hex.EncodeToString(sum[:]) + "  " + name + "\n")
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sums = filepath.Join(t.TempDir(), "trace.sha256")
	if err := os.WriteFile(sums, []byte(list.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, sums
}

func TestPackingChecksTheTrace(t *testing.T) {
	dir, sums := syntheticTrace(t)
	run := func(args ...string) (string, error) {
		cmd := packingCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append([]string{"--trace", dir, "--workload", "test", "--policy", "bestfit", "--seed", "1"}, args...))
		err := cmd.Execute()
		return out.String(), err
	}

	out, err := run("--checksums", sums)
	if err != nil {
		t.Fatalf("the files as summed: %v", err)
	}
	var res packing.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Workload != "test" || len(res.Points) == 0 {
		t.Errorf("the files as summed: got %q (%v), want a result for workload test", out, err)
	}

	if _, err := run(); err == nil || !strings.Contains(err.Error(), packing.PodFile("test")+": has no checksum there") ||
		!strings.Contains(err.Error(), "hack/fetch-openb.sh") {
		t.Errorf("a trace other than openb without --checksums: err = %v, want the files refused and how to fetch openb", err)
	}

	pods := filepath.Join(dir, packing.PodFile("test"))
	if err := os.WriteFile(pods, []byte("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,4000,8192,1,500\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := run("--checksums", sums); err == nil || !strings.Contains(err.Error(), packing.PodFile("test")+": SHA-256 ") {
		t.Errorf("a changed workload: err = %v, want its SHA-256 mismatch", err)
	}
}

func TestStudyChecksTheTraceFirst(t *testing.T) {
	dir, sums := syntheticTrace(t)
	if err := os.WriteFile(filepath.Join(dir, packing.NodeFile), []byte("sn,cpu_milli,memory_mib,gpu,model\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := studyFlags{trace: dir, checksums: sums, workloads: "test", policies: "random", seeds: "1", out: t.TempDir(), workers: 1}
	var stdout, stderr bytes.Buffer
	err := runStudy(t.Context(), f, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), packing.NodeFile+": SHA-256 ") {
		t.Errorf("a changed cluster: err = %v, want its SHA-256 mismatch", err)
	}
	if stdout.Len()+stderr.Len() > 0 {
		t.Errorf("runs before the check failed:\n%s%s", stdout.String(), stderr.String())
	}
}

// TestStudyReportsEarlierResults: --results reports the runs of an earlier
// study that match the flags, and runs nothing (the trace directory does
// not exist).
func TestStudyReportsEarlierResults(t *testing.T) {
	in := filepath.Join(t.TempDir(), "results.json")
	runs := []packing.Result{
		{Policy: "fgd", Workload: "default", Seed: 42, Points: []packing.Point{{Arrived: 1, UnallocatedPct: 5}}},
		{Policy: "fgd", Workload: "default", Seed: 45, Points: []packing.Point{{Arrived: 1, UnallocatedPct: 7}}},
		{Policy: "random", Workload: "default", Seed: 45, Points: []packing.Point{{Arrived: 1, UnallocatedPct: 14}}},
	}
	b, err := json.Marshal(runs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	f := studyFlags{trace: "no-such-dir", results: in, workloads: "default", policies: "fgd", seeds: "45-51", out: out, workers: 1}
	var stdout, stderr bytes.Buffer
	if err := runStudy(t.Context(), f, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	md := stdout.String()
	if !strings.Contains(md, "| fgd | 7.00 |") || strings.Contains(md, "| random |") || !strings.Contains(md, "Seeds: 45 (1 per row)") {
		t.Errorf("report of seed 45, fgd only, wanted:\n%s", md)
	}
	f.seeds = "50"
	if err := runStudy(t.Context(), f, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "no run") {
		t.Errorf("no matching run: err = %v", err)
	}
	// a report into the directory the results come from would lose the runs it leaves out
	f.seeds, f.out = "45", filepath.Dir(in)
	if err := runStudy(t.Context(), f, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "give another --out") {
		t.Errorf("--out holding --results: err = %v", err)
	}
	if after, err := os.ReadFile(in); err != nil || !bytes.Equal(after, b) {
		t.Errorf("results.json changed: %v", err)
	}
}
