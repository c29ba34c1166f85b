package allocator

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
