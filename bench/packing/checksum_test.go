package packing

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sumsOfTiny are sha256sum's sums of the files tinyTrace writes.
const sumsOfTiny = "22bfee0ec06b76b7a8b9dd7fa49b0e9f2c7984f3cfa50af056e86430bbfa7fbe  nodes.csv\n" +
	"089f5127fb751e47500139c1bb05a93659b99ba5ee4b8062a32594415c8b4cb2 *pods.csv\n"

// tinyTrace writes a trace directory of two small files and their
// checksum file, and returns the directory.
func tinyTrace(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir, "nodes.csv", "sn,gpu\nn0,8\n")
	writeFile(t, dir, "pods.csv", "name,num_gpu\np0,1\n")
	writeFile(t, dir, "SHA256SUMS", sumsOfTiny)
	return dir
}

func writeFile(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestVerify(t *testing.T) {
	tests := map[string]struct {
		edit   func(t *testing.T, dir string)
		verify []string
		want   []string // in the error, in this order; none: no error
	}{
		"the files as summed": {verify: []string{"nodes.csv", "pods.csv"}},
		"a changed file not asked for": {verify: []string{"nodes.csv"},
			edit: func(t *testing.T, dir string) { writeFile(t, dir, "pods.csv", "name,num_gpu\np0,2\n") }},
		"one byte changed": {verify: []string{"nodes.csv", "pods.csv"},
			edit: func(t *testing.T, dir string) { writeFile(t, dir, "nodes.csv", "sn,gpu\nn0,9\n") },
			want: []string{"does not match", "SHA256SUMS:\n",
				"  nodes.csv: SHA-256 89eda3d50b4d0a2eaf18c41c80d158598ffc5298f25857d54f73a16026168792, want 22bfee0ec06b76b7a8b9dd7fa49b0e9f2c7984f3cfa50af056e86430bbfa7fbe"}},
		"a missing file and a file without a sum": {verify: []string{"pods.csv", "SHA256SUMS"},
			edit: func(t *testing.T, dir string) {
				if err := os.Remove(filepath.Join(dir, "pods.csv")); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"  pods.csv: open ", "\n  SHA256SUMS: has no checksum there"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := tinyTrace(t)
			sums, err := ReadChecksums(filepath.Join(dir, "SHA256SUMS"))
			if err != nil {
				t.Fatal(err)
			}
			if tc.edit != nil {
				tc.edit(t, dir)
			}
			err = sums.Verify(dir, tc.verify...)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Verify passed, want an error with %q", tc.want)
			}
			rest := err.Error()
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("err = %v\nwant it to contain, in order, %q", err, tc.want)
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

func TestParseChecksumsErrors(t *testing.T) {
	const sum = "22bfee0ec06b76b7a8b9dd7fa49b0e9f2c7984f3cfa50af056e86430bbfa7fbe"
	tests := map[string]struct {
		in, want string
	}{
		"one space":        {in: sum + " a.csv\n", want: `sums:1: "` + sum + ` a.csv" is not "SHA256  FILE"`},
		"a short sum":      {in: "22bf  a.csv\n", want: "sums:1: "},
		"not hex":          {in: "\n" + strings.Repeat("g", 64) + "  a.csv\n", want: "sums:2: " + `"` + strings.Repeat("g", 64) + `" is not a SHA-256 in hex`},
		"a file twice":     {in: sum + "  a.csv\n" + sum + "  a.csv\n", want: "sums:2: a.csv listed twice"},
		"no sums at all":   {in: "\n", want: "sums: no checksums"},
		"a name, no space": {in: sum + "\n", want: "sums:1: "},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseChecksums(strings.NewReader(tc.in), "sums")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestOpenbChecksums(t *testing.T) {
	sums := OpenbChecksums()
	files := sums.Files()
	if len(files) != 26 {
		t.Errorf("%d files in %s, want the 26 csv files of cluster-trace-gpu-v2023: %q", len(files), OpenbSumsFile, files)
	}
	for _, f := range TraceFiles("", "default", "gpushare40", "multigpu50") {
		if _, ok := sums.sums[f]; !ok {
			t.Errorf("%s has no sum for %s", OpenbSumsFile, f)
		}
	}
	if diff := cmp.Diff([]string{NodeFile, "openb_pod_list_default.csv", "mine.csv"}, TraceFiles("", "default", "mine.csv")); diff != "" {
		t.Errorf("TraceFiles (-want +got)\n%s", diff)
	}
}

// openbDir is where the trace lies beside the repository (the default of
// gpuadmit-bench's --trace, seen from this package).
var openbDir = filepath.Join("..", "..", "..", "shared", "data", "openb")

func TestVerifyPublishedTrace(t *testing.T) {
	if _, err := os.Stat(openbDir); err != nil {
		t.Skipf("no openb trace at %s (%v); docs/trace.md says how to fetch it", openbDir, err)
	}
	sums := OpenbChecksums()
	if err := sums.Verify(openbDir, sums.Files()...); err != nil {
		t.Fatalf("the published trace fails: %v", err)
	}
	body, err := os.ReadFile(filepath.Join(openbDir, NodeFile))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	body[len(body)/2] ^= 1
	if err := os.WriteFile(filepath.Join(dir, NodeFile), body, 0o600); err != nil {
		t.Fatal(err)
	}
	err = sums.Verify(dir, NodeFile)
	if err == nil || !strings.Contains(err.Error(), NodeFile+": SHA-256 ") {
		t.Errorf("a copy with one bit changed: err = %v, want a SHA-256 mismatch", err)
	}
	if theirs, err := os.ReadFile(filepath.Join(openbDir, "SHA256SUMS")); err == nil && string(theirs) != openbSums {
		t.Errorf("%s differs from the trace's own SHA256SUMS", OpenbSumsFile)
	}
}

func TestTraceDocListsTheSums(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "trace.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```\n"+openbSums+"```\n") {
		t.Errorf("docs/trace.md has no code block equal to %s; copy the file into it", OpenbSumsFile)
	}
}

// TestPodListsAreTheTrace: PodLists names every pod list whose sum the
// repository keeps, and no other.
func TestPodListsAreTheTrace(t *testing.T) {
	var listed []string
	for _, f := range OpenbChecksums().Files() {
		if strings.HasPrefix(f, "openb_pod_list_") {
			listed = append(listed, f)
		}
	}
	var files []string
	for _, w := range PodLists {
		files = append(files, PodFile(w))
	}
	slices.Sort(files)
	if diff := cmp.Diff(listed, files); diff != "" {
		t.Errorf("pod lists in openb.sha256 (-) against PodLists (+)\n%s", diff)
	}
}
