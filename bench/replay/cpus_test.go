package replay

import (
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSplitCPUs: the scheduler's CPUs come off the ones this process may
// use, the rest are the others; a list that is not one, names a CPU this
// process may not use, or leaves none for the rest is refused, naming it.
func TestSplitCPUs(t *testing.T) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for c := range 1024 {
		if all.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) < 2 {
		t.Skipf("this process may run on %d CPU; the split needs two", len(cpus))
	}
	last := cpus[len(cpus)-1]
	s, err := splitCPUs(itoa(last))
	if err != nil {
		t.Fatal(err)
	}
	if !s.scheduler.IsSet(last) || s.scheduler.Count() != 1 || s.rest.IsSet(last) || s.rest.Count() != len(cpus)-1 {
		t.Errorf("split of %d: scheduler %v, rest %v", last, s.scheduler, s.rest)
	}
	if got := s.wrap(); strings.Join(got, " ") != "taskset --cpu-list "+itoa(last) {
		t.Errorf("wrap %v", got)
	}
	for list, want := range map[string]string{
		"x":                              `"x" is not a CPU`,
		"1-0":                            `"1-0" is not a CPU`,
		"1024":                           "may not run on CPU 1024",
		itoa(cpus[0]) + "-" + itoa(last): "no CPU left",
	} {
		if _, err := splitCPUs(list); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("split of %q: error %v, want one saying %q", list, err, want)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
