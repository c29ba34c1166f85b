package allocator

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuadmit/gpuadmit/internal/nvmlreading"
)

// sharedNVML is where the project keeps the NVML readings, seen from this
// package's directory; testdata/nvml holds copies so the package tests alone.
var sharedNVML = filepath.Join("..", "..", "..", "shared", "data", "nvml")

// nvmlReading is what a raw NVML probe dump says about one GPU, in the catalog's types.
type nvmlReading struct {
	Name      string
	MemoryMiB int64
	Profiles  []Profile
}

// readNVML reads a probe dump (package nvmlreading parses it): NVML's
// "slices" is the compute slices, the placements' size the memory slices.
func readNVML(path string) (nvmlReading, error) {
	r, err := nvmlreading.Read(path)
	if err != nil {
		return nvmlReading{}, err
	}
	out := nvmlReading{Name: r.Name, MemoryMiB: r.MemoryMiB}
	for _, p := range r.Profiles {
		pr := Profile{Name: p.Name, ID: p.ID, ComputeSlices: p.Slices, MemoryMiB: p.MemoryMiB, SMs: p.SMs, MaxInstances: p.Instances, MemorySlices: p.Placements[0].Size}
		for _, pl := range p.Placements {
			if pl.Size != pr.MemorySlices {
				return nvmlReading{}, fmt.Errorf("%s: profile %s has placements of different sizes", path, p.Name)
			}
			pr.Placements = append(pr.Placements, Placement{Start: pl.Start, Size: pl.Size})
		}
		out.Profiles = append(out.Profiles, pr)
	}
	return out, nil
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

// TestNVMLCopiesMatchShared checks the copies in testdata/nvml against the
// checksums of the originals recorded beside them (SHA256SUMS), so a clean
// clone without the originals still tests its own copy, and against the
// originals themselves where they are present.
func TestNVMLCopiesMatchShared(t *testing.T) {
	sums := readSums(t, filepath.Join("testdata", "nvml", "SHA256SUMS"))
	copies, err := filepath.Glob(filepath.Join("testdata", "nvml", "*.txt"))
	if err != nil || len(copies) == 0 {
		t.Fatalf("no readings in testdata/nvml (%v)", err)
	}
	for _, c := range copies {
		if _, ok := sums[filepath.Base(c)]; !ok {
			t.Errorf("%s has no checksum in SHA256SUMS: it is not a copy of a reading", c)
		}
	}
	for name, want := range sums {
		if got := fileSum(t, filepath.Join("testdata", "nvml", name)); got != want {
			t.Errorf("testdata/nvml/%s has sha256 %s, the reading has %s; copy it again from %s", name, got, want, sharedNVML)
		}
	}
	entries, err := os.ReadDir(sharedNVML)
	if errors.Is(err, fs.ErrNotExist) {
		return // the originals are not beside this checkout; the copies were checked above
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if got := fileSum(t, filepath.Join(sharedNVML, e.Name())); got != sums[e.Name()] {
			t.Errorf("%s has sha256 %s, SHA256SUMS says %q; copy the reading and its checksum again", e.Name(), got, sums[e.Name()])
		}
	}
}

// readSums reads a sha256sum listing: file name → hex digest.
func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("%s: malformed line %q", path, line)
		}
		out[name] = sum
	}
	return out
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Error(err)
		return ""
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}
