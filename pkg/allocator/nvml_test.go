package allocator

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sharedNVML is where the project keeps the NVML readings, seen from this
// package's directory; testdata/nvml holds copies so the package tests alone.
var sharedNVML = filepath.Join("..", "..", "..", "shared", "data", "nvml")

// nvmlReading is what a raw NVML probe dump says about one GPU.
type nvmlReading struct {
	Name      string
	MemoryMiB int64
	Profiles  []Profile
}

var placementRE = regexp.MustCompile(`\((\d+), (\d+)\)`)

// readNVML parses a probe dump: the "name b'...'" line, every supported
// "profile N id X MIG <name> slices S inst I sm SM ce C memMB M rc2 0
// [(start, size), ...]" line, and nvidia-smi's "<name>, <total> MiB, ..." line.
func readNVML(path string) (nvmlReading, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nvmlReading{}, err
	}
	var r nvmlReading
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if err := r.readLine(strings.TrimSpace(sc.Text())); err != nil {
			return nvmlReading{}, fmt.Errorf("%s: %w", path, err)
		}
	}
	return r, sc.Err()
}

func (r *nvmlReading) readLine(line string) error {
	switch {
	case strings.HasPrefix(line, "name b'"):
		r.Name = strings.TrimSuffix(strings.TrimPrefix(line, "name b'"), "'")
	case strings.HasPrefix(line, "profile ") && strings.Contains(line, " MIG "):
		p, err := parseNVMLProfile(line)
		if err != nil {
			return err
		}
		r.Profiles = append(r.Profiles, p)
	case r.Name != "" && strings.HasPrefix(line, r.Name+", "):
		total, _, _ := strings.Cut(strings.TrimPrefix(line, r.Name+", "), " MiB,")
		mib, err := strconv.ParseInt(total, 10, 64)
		if err != nil {
			return fmt.Errorf("memory.total in %q: %w", line, err)
		}
		r.MemoryMiB = mib
	}
	return nil
}

// parseNVMLProfile reads one supported profile line of a raw dump. Its words
// come in pairs ("id 19", "MIG 1g.10gb", "slices 1", ...) before the
// placements; "slices" is NVML's sliceCount, the compute slices, and the
// placements' size is the memory slices.
func parseNVMLProfile(line string) (Profile, error) {
	head, placements, ok := strings.Cut(line, "[")
	words := strings.Fields(head)
	if !ok || len(words)%2 != 0 {
		return Profile{}, fmt.Errorf("profile line %q: want key value pairs, then placements", line)
	}
	kv := map[string]string{}
	for i := 0; i < len(words); i += 2 {
		kv[words[i]] = words[i+1]
	}
	p := Profile{Name: kv["MIG"]}
	var errs []error
	for key, dst := range map[string]*int{"id": &p.ID, "slices": &p.ComputeSlices, "inst": &p.MaxInstances, "sm": &p.SMs} {
		n, err := strconv.Atoi(kv[key])
		errs = append(errs, err)
		*dst = n
	}
	mib, err := strconv.ParseInt(kv["memMB"], 10, 64)
	p.MemoryMiB = mib
	errs = append(errs, err)
	p.Placements, p.MemorySlices, err = parseNVMLPlacements(placements)
	if err := errors.Join(append(errs, err)...); err != nil {
		return Profile{}, fmt.Errorf("profile line %q: %w", line, err)
	}
	return p, nil
}

func parseNVMLPlacements(s string) ([]Placement, int, error) {
	var out []Placement
	for _, m := range placementRE.FindAllStringSubmatch(s, -1) {
		start, _ := strconv.Atoi(m[1])
		size, _ := strconv.Atoi(m[2])
		out = append(out, Placement{Start: start, Size: size})
	}
	if len(out) == 0 {
		return nil, 0, fmt.Errorf("no placements in %q", s)
	}
	for _, pl := range out {
		if pl.Size != out[0].Size {
			return nil, 0, fmt.Errorf("placements of different sizes in %q", s)
		}
	}
	return out, out[0].Size, nil
}

func TestParseNVMLProfile(t *testing.T) {
	line := "profile 9 id 15 MIG 1g.20gb slices 1 inst 4 sm 26 ce 1 memMB 20096 rc2 0 [(0, 2), (2, 2), (4, 2), (6, 2)]"
	want := Profile{
		Name: "1g.20gb", ID: 15, ComputeSlices: 1, MemorySlices: 2, MemoryMiB: 20096, SMs: 26, MaxInstances: 4,
		Placements: []Placement{{0, 2}, {2, 2}, {4, 2}, {6, 2}},
	}
	got, err := parseNVMLProfile(line)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseNVMLProfile (-want +got):\n%s", diff)
	}
	if _, err := parseNVMLProfile("profile 5 id 9 MIG 3g.40gb slices x [(0, 4)]"); err == nil {
		t.Error("parseNVMLProfile accepted a line with a missing value")
	}
}

func TestCatalogMatchesNVMLReadings(t *testing.T) {
	tests := map[string]struct {
		file  string
		model string
	}{
		"H100 80GB HBM3": {file: "h100-80gb-hbm3-raw.txt", model: "H100-80GB"},
		"H200":           {file: "h200.txt", model: "H200-141GB"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			reading, err := readNVML(filepath.Join("testdata", "nvml", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if reading.Name == "" || reading.MemoryMiB == 0 || len(reading.Profiles) != 7 {
				t.Fatalf("reading incomplete: name %q, %d MiB, %d profiles", reading.Name, reading.MemoryMiB, len(reading.Profiles))
			}
			m, ok := Default().ByProduct(reading.Name)
			if !ok || m.Name != tc.model {
				t.Fatalf("ByProduct(%q) = %q, %v; want %q", reading.Name, m.Name, ok, tc.model)
			}
			if m.MemoryMiB != reading.MemoryMiB {
				t.Errorf("%s MemoryMiB = %d, NVML reads %d", m.Name, m.MemoryMiB, reading.MemoryMiB)
			}
			if diff := cmp.Diff(profilesByName(reading.Profiles), profilesByName(m.Profiles)); diff != "" {
				t.Errorf("%s profiles differ from the NVML reading (-want +got):\n%s", m.Name, diff)
			}
		})
	}
}

func profilesByName(ps []Profile) map[string]Profile {
	out := make(map[string]Profile, len(ps))
	for _, p := range ps {
		out[p.Name] = p
	}
	return out
}

func TestNVMLCopiesMatchShared(t *testing.T) {
	entries, err := os.ReadDir(sharedNVML)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("%s is absent in this checkout; testdata/nvml stands on its own", sharedNVML)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		want, err := os.ReadFile(filepath.Join(sharedNVML, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("testdata", "nvml", e.Name()))
		if err != nil {
			t.Errorf("no copy of %s in testdata/nvml: %v", e.Name(), err)
			continue
		}
		if !bytes.Equal(want, got) {
			t.Errorf("testdata/nvml/%s differs from %s; copy it again", e.Name(), filepath.Join(sharedNVML, e.Name()))
		}
	}
	copies, _ := filepath.Glob(filepath.Join("testdata", "nvml", "*.txt"))
	for _, c := range copies {
		if _, err := os.Stat(filepath.Join(sharedNVML, filepath.Base(c))); err != nil {
			t.Errorf("%s has no original in %s: %v", c, sharedNVML, err)
		}
	}
}
