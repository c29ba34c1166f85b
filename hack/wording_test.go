package hack

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// organisational matches wording that speaks of how the work on gpuadmit
// was organised (tracker issue numbers, numbered stops, who else worked)
// rather than of the software. Each pattern is narrow enough that prose
// about an issue, a pod that stops, or an upstream issue's URL
// (github.com/kubernetes/kubernetes/issues/123) does not match.
var organisational = []*regexp.Regexp{
	regexp.MustCompile(`\b[Ii]ssues? #[0-9]+`),
	regexp.MustCompile(`\([Ii]ssues? [0-9]+`),
	regexp.MustCompile(`\b[Ii]ssues? [0-9]+(?:'s\b|,| and [0-9]+)`),
	regexp.MustCompile(`\bIssue [0-9]+\b`),
	regexp.MustCompile(`(?i)\b(?:in|of|for|from|by|see) issues? [0-9]+\b`),
	regexp.MustCompile(`\b[Ss]top [0-9]+\b`),
	regexp.MustCompile(`(?i)\b(?:this|that|the previous|the next) stop\b`),
	regexp.MustCompile(`(?i)\b(?:this|other|another) sessions?\b`),
}

func TestWordingMatchesOrganisationalReferences(t *testing.T) {
	is := "is" + "sue" // kept apart so that this file does not match itself
	match := []string{
		"(" + is + " 28)",
		"(" + is + " 17, st" + "op 24)",
		is + " 17's targets",
		is + " 28, first part",
		is + "s 27 and 28",
		"I" + is[1:] + " 30 in full",
		"I" + is[1:] + " #7",
		"as asked in " + is + " 12",
		"st" + "op 24",
		"at the end of the previous st" + "op",
		"other sess" + "ions' builds",
		"in the time this sess" + "ion had",
	}
	noMatch := []string{
		"an " + is + " with the API server",
		"the webhook " + is + "s 2 writes per pod",
		"github.com/kubernetes/kubernetes/" + is + "s/123",
		"kubernetes/kubernetes#123",
		"the kubelet stops 3 containers",
		"Stop ends every process",
		"with up to GOMAXPROCS-1 helpers",
		"the TLS session cache",
	}
	for _, s := range match {
		if organisationalIn(s) == "" {
			t.Errorf("organisationalIn(%q) matched nothing, want a match", s)
		}
	}
	for _, s := range noMatch {
		if m := organisationalIn(s); m != "" {
			t.Errorf("organisationalIn(%q) = %q, want no match", s, m)
		}
	}
}

// TestTreeSpeaksOfTheSoftware fails naming file:line for every line of the
// repository's files that speaks of how the work was organised.
func TestTreeSpeaksOfTheSoftware(t *testing.T) {
	root := ".."
	files, err := trackedFiles(root)
	if err != nil {
		t.Logf("git ls-files: %v; walking the tree instead", err)
		if files, err = walkedFiles(root); err != nil {
			t.Fatal(err)
		}
	}
	if len(files) == 0 {
		t.Fatal("no files found under the repository root")
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, f))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the working tree, not yet in the index
		}
		if err != nil {
			t.Fatal(err)
		}
		if bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0 {
			continue // binary
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, len(data)+1)
		for n := 1; sc.Scan(); n++ {
			if m := organisationalIn(sc.Text()); m != "" {
				t.Errorf("%s:%d: %q speaks of how the work was organised; say what the software does", f, n, m)
			}
		}
	}
}

func organisationalIn(line string) string {
	for _, re := range organisational {
		if m := re.FindString(line); m != "" {
			return strings.TrimSpace(m)
		}
	}
	return ""
}

// trackedFiles lists the files git tracks under root, relative to it.
func trackedFiles(root string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, err
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	return files, nil
}

// walkedFiles lists the regular files under root, relative to it, without
// git's directory and the end-to-end binaries.
func walkedFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() && (d.Name() == ".git" || rel == "test/e2e/.bin") {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			files = append(files, rel)
		}
		return nil
	})
	return files, err
}
