package allocator

import (
	"errors"
	"math/big"
	"testing"
)

// migModels returns the built-in models that have MIG profiles.
func migModels() []Model {
	var out []Model
	for _, m := range Default().Models() {
		if m.MIG() {
			out = append(out, m)
		}
	}
	return out
}

func FuzzFitMemory(f *testing.F) {
	for _, mib := range []int64{-1, 0, 1, 4864, 9856, 9984, 9985, 10240, 16000, 16385, 81152, 81153, 1 << 62} {
		f.Add(uint8(0), mib)
		f.Add(uint8(3), mib)
	}
	models := migModels()
	f.Fuzz(func(t *testing.T, pick uint8, mib int64) {
		m := models[int(pick)%len(models)]
		got, err := FitMemory(m.Profiles, mib)
		switch {
		case mib <= 0:
			if err == nil || errors.Is(err, ErrNoFit) {
				t.Fatalf("%s: FitMemory(%d) error = %v, want a request error", m.Name, mib, err)
			}
		case errors.Is(err, ErrNoFit):
			for _, p := range m.Profiles {
				if p.MemoryMiB >= mib {
					t.Fatalf("%s: FitMemory(%d) found no fit, but %s has %d MiB", m.Name, mib, p.Name, p.MemoryMiB)
				}
			}
		case err != nil:
			t.Fatalf("%s: FitMemory(%d): %v", m.Name, mib, err)
		default:
			checkMemoryFit(t, m, mib, got)
		}
	})
}

// checkMemoryFit fails t unless got is one of m's profiles, holds mib and
// no plain profile with less memory, or as much memory and fewer compute
// slices, would have held it too.
func checkMemoryFit(t *testing.T, m Model, mib int64, got Profile) {
	t.Helper()
	if _, ok := m.Profile(got.Name); !ok || got.MemoryMiB < mib {
		t.Fatalf("%s: FitMemory(%d) = %s with %d MiB", m.Name, mib, got.Name, got.MemoryMiB)
	}
	for _, p := range m.Profiles {
		if extended(p) || p.MemoryMiB < mib {
			continue
		}
		if extended(got) || byMemory(p, got) < 0 {
			t.Fatalf("%s: FitMemory(%d) = %s, but %s (%d MiB, %d compute slices) fits better",
				m.Name, mib, got.Name, p.Name, p.MemoryMiB, p.ComputeSlices)
		}
	}
}

func FuzzFitFraction(f *testing.F) {
	for _, milli := range []int64{-1, 0, 1, 124, 125, 126, 250, 333, 500, 501, 999, 1000, 1001} {
		f.Add(uint8(0), milli)
		f.Add(uint8(2), milli)
	}
	models := migModels()
	f.Fuzz(func(t *testing.T, pick uint8, milli int64) {
		m := models[int(pick)%len(models)]
		got, err := FitFraction(m.Profiles, m.MemorySlices, milli)
		if milli < 1 || milli > 1000 {
			if err == nil || errors.Is(err, ErrNoFit) {
				t.Fatalf("%s: FitFraction(%dm) error = %v, want a request error", m.Name, milli, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("%s: FitFraction(%dm): %v (every built-in model has a whole-GPU profile)", m.Name, milli, err)
		}
		// The profile covers the fraction of the memory slices, and one slice
		// fewer would not have.
		if int64(got.MemorySlices)*1000 < milli*int64(m.MemorySlices) {
			t.Fatalf("%s: FitFraction(%dm) = %s, only %d of %d slices", m.Name, milli, got.Name, got.MemorySlices, m.MemorySlices)
		}
		for _, p := range m.Profiles {
			if !extended(p) && int64(p.MemorySlices)*1000 >= milli*int64(m.MemorySlices) && bySlices(p, got) < 0 {
				t.Fatalf("%s: FitFraction(%dm) = %s, but %s is smaller", m.Name, milli, got.Name, p.Name)
			}
		}
	})
}

func FuzzShareUnits(f *testing.F) {
	f.Add(int64(3000), int64(1024), int64(500), int64(15360))
	f.Add(int64(-1), int64(0), int64(1001), int64(1<<62))
	f.Add(int64(1<<63-1), int64(3), int64(999), int64(1<<63-1))
	f.Fuzz(func(t *testing.T, mib, unit, milli, gpu int64) {
		n := ShareUnits(mib, unit)
		if mib <= 0 || unit <= 0 {
			if n != 0 {
				t.Fatalf("ShareUnits(%d, %d) = %d, want 0", mib, unit, n)
			}
		} else if !smallestCover(n, big.NewInt(unit), big.NewInt(mib)) {
			t.Fatalf("ShareUnits(%d, %d) = %d, not the fewest units that hold it", mib, unit, n)
		}
		n = FractionShareUnits(milli, gpu, unit)
		if milli < 1 || milli > 1000 || gpu <= 0 || unit <= 0 {
			if n != 0 {
				t.Fatalf("FractionShareUnits(%d, %d, %d) = %d, want 0", milli, gpu, unit, n)
			}
			return
		}
		if milli == 1000 {
			if n != gpu/unit {
				t.Fatalf("FractionShareUnits(1000, %d, %d) = %d, want every whole unit, %d", gpu, unit, n, gpu/unit)
			}
			return
		}
		// In thousandths of a MiB: n units of 1000×unit hold milli×gpu, n-1 do not.
		need := new(big.Int).Mul(big.NewInt(milli), big.NewInt(gpu))
		if !smallestCover(n, new(big.Int).Mul(big.NewInt(unit), big.NewInt(1000)), need) {
			t.Fatalf("FractionShareUnits(%d, %d, %d) = %d, not the fewest units that hold it", milli, gpu, unit, n)
		}
	})
}

// smallestCover reports, in exact arithmetic, whether n units of unit hold
// want and n-1 units do not.
func smallestCover(n int64, unit, want *big.Int) bool {
	have := new(big.Int).Mul(big.NewInt(n), unit)
	less := new(big.Int).Sub(have, unit)
	return have.Cmp(want) >= 0 && less.Cmp(want) < 0
}
