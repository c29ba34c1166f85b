package intent

import (
	"fmt"
	"strconv"
)

// String describes the request in a short phrase for explanations:
// "2 whole GPUs", "1 GPU with 3000 MiB", "half a GPU", "1 MIG 1g.10gb slice",
// "2 time-sliced replicas".
func (r Request) String() string {
	s := r.amount()
	if r.CoresPercent > 0 {
		s += fmt.Sprintf(", %d%% of compute", r.CoresPercent)
	}
	return s
}

// amount describes Count and the field of the request's Form.
func (r Request) amount() string {
	switch r.Form {
	case Whole:
		if r.Dialect == NVIDIAShared {
			return fmt.Sprintf("%d time-sliced %s", r.Count, plural(r.Count, "replica"))
		}
		return fmt.Sprintf("%d whole %s", r.Count, plural(r.Count, "GPU"))
	case Memory:
		if r.Count == 1 {
			return fmt.Sprintf("1 GPU with %d MiB", r.MemoryMiB)
		}
		return fmt.Sprintf("%d GPUs with %d MiB each", r.Count, r.MemoryMiB)
	case Fraction:
		return fraction(r.FractionMilli, r.Count)
	case Profile:
		return fmt.Sprintf("%d MIG %s %s", r.Count, r.Profile, plural(r.Count, "slice"))
	}
	return "no GPU"
}

// fraction describes milli thousandths of each of count GPUs.
func fraction(milli, count int64) string {
	share := strconv.FormatFloat(float64(milli)/1000, 'f', -1, 64)
	switch milli {
	case 500:
		share = "half"
	case 1000:
		share = "all"
	}
	switch {
	case count != 1:
		return fmt.Sprintf("%s of each of %d GPUs", share, count)
	case milli == 500:
		return "half a GPU"
	}
	return share + " of a GPU"
}

// plural appends an s to noun unless n is 1.
func plural(n int64, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}
