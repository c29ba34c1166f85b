package packing

import (
	"bufio"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// openbSums are the SHA-256 sums of the published openb trace's files, in
// sha256sum's format: alibaba/clusterdata's cluster-trace-gpu-v2023/csv as of
// commit 50a91c7 (docs/trace.md). hack/fetch-openb.sh checks with the same file.
//
//go:embed openb.sha256
var openbSums string

// OpenbSumsFile is where OpenbChecksums come from, for messages.
const OpenbSumsFile = "bench/packing/openb.sha256"

// Checksums are the SHA-256 sums that the files of a trace directory must
// have, by file name.
type Checksums struct {
	source string
	sums   map[string]string
}

// OpenbChecksums are the sums of the published openb trace, the one the
// study was made with.
func OpenbChecksums() Checksums {
	c, err := ParseChecksums(strings.NewReader(openbSums), OpenbSumsFile)
	if err != nil {
		panic(err) // the embedded file is checked by the tests
	}
	return c
}

// ReadChecksums reads a file of sums as sha256sum prints them.
func ReadChecksums(path string) (Checksums, error) {
	f, err := os.Open(path)
	if err != nil {
		return Checksums{}, err
	}
	defer f.Close()
	return ParseChecksums(f, path)
}

// ParseChecksums reads sums as sha256sum prints them: per line 64 hex
// digits, two spaces (or a space and '*') and a file name. source names
// them in errors.
func ParseChecksums(r io.Reader, source string) (Checksums, error) {
	c := Checksums{source: source, sums: map[string]string{}}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		name, sum, err := checksumLine(sc.Text())
		if err != nil {
			return Checksums{}, fmt.Errorf("%s:%d: %w", source, n, err)
		}
		if _, dup := c.sums[name]; dup {
			return Checksums{}, fmt.Errorf("%s:%d: %s listed twice", source, n, name)
		}
		c.sums[name] = sum
	}
	if err := sc.Err(); err != nil {
		return Checksums{}, fmt.Errorf("%s: %w", source, err)
	}
	if len(c.sums) == 0 {
		return Checksums{}, fmt.Errorf("%s: no checksums", source)
	}
	return c, nil
}

func checksumLine(line string) (name, sum string, err error) {
	const n = 2 * sha256.Size
	if len(line) < n+3 || line[n] != ' ' || (line[n+1] != ' ' && line[n+1] != '*') {
		return "", "", fmt.Errorf("%q is not \"SHA256  FILE\" (sha256sum's format)", line)
	}
	sum, name = strings.ToLower(line[:n]), line[n+2:]
	if _, err := hex.DecodeString(sum); err != nil {
		return "", "", fmt.Errorf("%q is not a SHA-256 in hex", line[:n])
	}
	return name, sum, nil
}

// Files are the file names that have a sum, sorted.
func (c Checksums) Files() []string { return slices.Sorted(maps.Keys(c.sums)) }

// Verify checks each of files in dir against its sum, and fails on a file
// that differs, is missing or has no sum, naming every such file.
func (c Checksums) Verify(dir string, files ...string) error {
	var errs []error
	for _, name := range files {
		if err := c.verify(dir, name); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("trace %s does not match %s:\n%w", dir, c.source, errors.Join(errs...))
	}
	return nil
}

func (c Checksums) verify(dir, name string) error {
	got, err := fileSHA256(filepath.Join(dir, name))
	if err != nil {
		return fmt.Errorf("  %s: %w", name, err)
	}
	want, ok := c.sums[name]
	if !ok {
		return fmt.Errorf("  %s: has no checksum there", name)
	}
	if got != want {
		return fmt.Errorf("  %s: SHA-256 %s, want %s", name, got, want)
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// TraceFiles are the files of a trace directory that runs with the cluster
// file (NodeFile when empty) and these workloads read.
func TraceFiles(cluster string, workloads ...string) []string {
	files := []string{clusterFile(cluster)}
	for _, w := range workloads {
		files = append(files, PodFile(w))
	}
	return files
}
