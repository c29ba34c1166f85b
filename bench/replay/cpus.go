package replay

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// cpuSplit is the CPUs the scheduler runs on, by itself, and the CPUs the
// rest runs on: etcd, kube-apiserver and this process, which creates the
// pods. On a machine of few cores, the scheduler sharing them with the
// control plane and the load spends milliseconds waiting for a core in
// the middle of a cycle; its placement time then measures the machine.
type cpuSplit struct {
	scheduler, rest unix.CPUSet
	list            string // the scheduler's, as given
}

// splitCPUs parses list (taskset's form: 1, 0-3, 0,2) against the CPUs
// this process may run on; the rest are all the others.
func splitCPUs(list string) (*cpuSplit, error) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		return nil, fmt.Errorf("scheduler CPUs: read this process's CPUs: %w", err)
	}
	s := &cpuSplit{list: list, rest: all}
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := strconv.Atoi(lo)
		last := first
		if err == nil && isRange {
			last, err = strconv.Atoi(hi)
		}
		if err != nil || first < 0 || last < first {
			return nil, fmt.Errorf("scheduler CPUs %q: %q is not a CPU or a range of CPUs (taskset's list: 1, 0-3, 0,2)", list, part)
		}
		for c := first; c <= last; c++ {
			if !all.IsSet(c) {
				return nil, fmt.Errorf("scheduler CPUs %q: this process may not run on CPU %d", list, c)
			}
			s.scheduler.Set(c)
			s.rest.Clear(c)
		}
	}
	if s.rest.Count() == 0 {
		return nil, fmt.Errorf("scheduler CPUs %q: no CPU left for the control plane", list)
	}
	return s, nil
}

// pinRest moves every thread of this process to the rest's CPUs; threads
// made later, and the processes they start (etcd, kube-apiserver), inherit
// them.
func (s *cpuSplit) pinRest() error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("pin to CPUs %s: %w", s.restList(), err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &s.rest); err != nil && err != unix.ESRCH {
			return fmt.Errorf("pin thread %d to CPUs %s: %w", tid, s.restList(), err)
		}
	}
	return nil
}

// restList is the rest's CPUs, comma-separated.
func (s *cpuSplit) restList() string {
	var cpus []string
	for c := range 1024 {
		if s.rest.IsSet(c) {
			cpus = append(cpus, strconv.Itoa(c))
		}
	}
	return strings.Join(cpus, ",")
}

// wrap is the command that runs the scheduler on its CPUs: taskset sets
// them before the scheduler starts, so that every thread it makes has them.
func (s *cpuSplit) wrap() []string { return []string{"taskset", "--cpu-list", s.list} }
