package allocator

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
)

// ErrNoFit says that no profile is large enough for a request. Callers test
// for it with errors.Is: it is the user's problem (ask for less, or for
// another GPU model), where the other errors of this file say the request
// itself is malformed.
var ErrNoFit = errors.New("no fit")

// FitMemory returns the profile with the smallest MemoryMiB that holds mib
// MiB. Ties go to fewer compute slices, then fewer memory slices. Profiles
// with an extension ("1g.10gb+me") are special resources and are chosen only
// when nothing else fits. mib must be positive; when no profile is large
// enough the error wraps ErrNoFit.
func FitMemory(profiles []Profile, mib int64) (Profile, error) {
	if mib <= 0 {
		return Profile{}, fmt.Errorf("memory request must be positive, got %d MiB", mib)
	}
	if p, ok := best(profiles, func(p Profile) bool { return p.MemoryMiB >= mib }, byMemory); ok {
		return p, nil
	}
	if len(profiles) == 0 {
		return Profile{}, fmt.Errorf("%w: no MIG profiles, %d MiB asked", ErrNoFit, mib)
	}
	top := largest(profiles, byMemory)
	return Profile{}, fmt.Errorf("%w: largest profile %s has %d MiB, %d MiB asked", ErrNoFit, top.Name, top.MemoryMiB, mib)
}

// FitFraction returns the profile that serves milli thousandths of a GPU with
// totalMemorySlices memory slices: the one with the fewest memory slices that
// covers ceil(milli × totalMemorySlices / 1000) of them. Ties go to fewer
// compute slices, then less memory; extension profiles are chosen only when
// nothing else fits. milli must be within 1..1000 and totalMemorySlices
// positive; when no profile is large enough the error wraps ErrNoFit.
func FitFraction(profiles []Profile, totalMemorySlices int, milli int64) (Profile, error) {
	if milli < 1 || milli > 1000 {
		return Profile{}, fmt.Errorf("fraction must be within 1m..1000m of a GPU, got %dm", milli)
	}
	if totalMemorySlices <= 0 {
		return Profile{}, fmt.Errorf("GPU must have memory slices to take a fraction, got %d", totalMemorySlices)
	}
	need := ceilMilli(milli, int64(totalMemorySlices))
	if p, ok := best(profiles, func(p Profile) bool { return int64(p.MemorySlices) >= need }, bySlices); ok {
		return p, nil
	}
	if len(profiles) == 0 {
		return Profile{}, fmt.Errorf("%w: no MIG profiles, %dm of a GPU asked", ErrNoFit, milli)
	}
	top := largest(profiles, bySlices)
	return Profile{}, fmt.Errorf("%w: largest profile %s covers %d memory slices, %dm of a GPU needs %d",
		ErrNoFit, top.Name, top.MemorySlices, milli, need)
}

// ShareUnits returns how many units of unitMiB MiB hold mib MiB, rounding up:
// 3000 MiB at 1024 MiB a unit is 3 units, 3073 MiB is 4. It returns 0 when
// mib or unitMiB is not positive.
func ShareUnits(mib, unitMiB int64) int64 {
	if mib <= 0 || unitMiB <= 0 {
		return 0
	}
	return ceilDiv(mib, unitMiB)
}

// FractionShareUnits returns how many units of unitMiB MiB hold milli
// thousandths of a GPU with gpuMemoryMiB MiB: ceil(milli × gpuMemoryMiB /
// (1000 × unitMiB)), computed without overflow. Half of a T4 (15360 MiB) at
// 1024 MiB a unit is 8 units; the whole GPU (1000) is every whole unit it
// has, never one more. It returns 0 when milli is outside 1..1000 or a size
// is not positive.
func FractionShareUnits(milli, gpuMemoryMiB, unitMiB int64) int64 {
	if milli < 1 || milli > 1000 || gpuMemoryMiB <= 0 || unitMiB <= 0 {
		return 0
	}
	if milli == 1000 {
		// The whole GPU is every whole unit it has: 81559 MiB is 79 units
		// of 1024 MiB, and rounding up would ask for an 80th it lacks.
		return gpuMemoryMiB / unitMiB
	}
	// ceil(ceil(x/a)/b) = ceil(x/(a×b)) for positive integers.
	return ceilDiv(ceilMilli(milli, gpuMemoryMiB), unitMiB)
}

// best returns the smallest profile, by compare, among those that fit,
// preferring any profile without an extension to one with an extension and
// breaking remaining ties by name so the answer never depends on order.
func best(profiles []Profile, fits func(Profile) bool, compare func(a, b Profile) int) (Profile, bool) {
	var pick Profile
	found := false
	for _, p := range profiles {
		if fits(p) && (!found || better(p, pick, compare)) {
			pick, found = p, true
		}
	}
	return pick.clone(), found
}

func better(p, than Profile, compare func(a, b Profile) int) bool {
	if extended(p) != extended(than) {
		return !extended(p)
	}
	return cmp.Or(compare(p, than), strings.Compare(p.Name, than.Name)) < 0
}

// largest returns the largest profile by compare; profiles must not be empty.
func largest(profiles []Profile, compare func(a, b Profile) int) Profile {
	top := profiles[0]
	for _, p := range profiles[1:] {
		if compare(p, top) > 0 {
			top = p
		}
	}
	return top
}

// extended reports whether p carries an extension such as media engines
// ("+me"), which the device plugin advertises as a resource of its own.
func extended(p Profile) bool {
	return strings.Contains(NormalizeProfile(p.Name), "+")
}

func byMemory(a, b Profile) int {
	return cmp.Or(
		cmp.Compare(a.MemoryMiB, b.MemoryMiB),
		cmp.Compare(a.ComputeSlices, b.ComputeSlices),
		cmp.Compare(a.MemorySlices, b.MemorySlices))
}

func bySlices(a, b Profile) int {
	return cmp.Or(
		cmp.Compare(a.MemorySlices, b.MemorySlices),
		cmp.Compare(a.ComputeSlices, b.ComputeSlices),
		cmp.Compare(a.MemoryMiB, b.MemoryMiB))
}

// ceilMilli returns ceil(milli × x / 1000) for milli in 1..1000 and x ≥ 0
// without forming milli × x, which could overflow.
func ceilMilli(milli, x int64) int64 {
	return x/1000*milli + ceilDiv(x%1000*milli, 1000)
}

// ceilDiv returns ceil(a / b) for a ≥ 0 and b > 0.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}
