// Package nvmlreading parses the read-only NVML probe dumps of real GPUs
// (shared/data/nvml, copied in pkg/allocator/testdata/nvml): the GPU's name
// and total memory, its MIG mode, every GPU-instance profile NVML answered
// and the error code of those it refused. The allocator's catalog test and
// the agent's NVML fakes both read the dumps through it.
package nvmlreading

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Placement is a possible placement of a profile: start and size in memory slices.
type Placement struct{ Start, Size int }

// Profile is one GPU-instance profile NVML answered.
type Profile struct {
	// Index is the profile's index in NVML's query (0, 1, … 9), ID its profile id.
	Index, ID int
	// Name is the profile's name without NVML's "MIG " prefix ("1g.20gb").
	Name string
	// Slices is NVML's sliceCount (compute slices); Instances its instance count.
	Slices, Instances, SMs, CopyEngines int
	MemoryMiB                           int64
	Placements                          []Placement
}

// MIG is the dump's "migmode" line: the query's return code, current and pending modes.
type MIG struct{ Return, Current, Pending int }

// Reading is one dump.
type Reading struct {
	Name      string
	MemoryMiB int64
	MIG       *MIG
	// Profiles are sorted by Index; Refused maps a refused index to NVML's return code.
	Profiles []Profile
	Refused  map[int]int
}

var (
	refusedLine = regexp.MustCompile(`^profile (\d+) rc (\d+)$`)
	migLine     = regexp.MustCompile(`^migmode rc (\d+) (\d+) (\d+)$`)
	pair        = regexp.MustCompile(`\((\d+), (\d+)\)`)
)

// Read parses the dump at path.
func Read(path string) (Reading, error) {
	f, err := os.Open(path)
	if err != nil {
		return Reading{}, err
	}
	defer f.Close()
	r, err := Parse(f)
	if err != nil {
		return Reading{}, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// Parse reads a dump; it is incomplete without a name, total memory and a profile.
func Parse(in io.Reader) (Reading, error) {
	r := Reading{Refused: map[int]int{}}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if err := r.line(strings.TrimSpace(sc.Text())); err != nil {
			return Reading{}, err
		}
	}
	if err := sc.Err(); err != nil {
		return Reading{}, err
	}
	if r.Name == "" || r.MemoryMiB == 0 || len(r.Profiles) == 0 {
		return Reading{}, errors.New("incomplete reading: no name, total memory or profile")
	}
	sort.Slice(r.Profiles, func(i, j int) bool { return r.Profiles[i].Index < r.Profiles[j].Index })
	return r, nil
}

func (r *Reading) line(line string) error {
	if m := refusedLine.FindStringSubmatch(line); m != nil {
		n := atois(m[1:])
		r.Refused[n[0]] = n[1]
		return nil
	}
	if m := migLine.FindStringSubmatch(line); m != nil {
		n := atois(m[1:])
		r.MIG = &MIG{Return: n[0], Current: n[1], Pending: n[2]}
		return nil
	}
	switch {
	case strings.HasPrefix(line, "name b'"):
		r.Name = strings.TrimSuffix(strings.TrimPrefix(line, "name b'"), "'")
	case strings.HasPrefix(line, "profile ") && strings.Contains(line, " MIG "):
		p, err := ParseProfile(line)
		if err != nil {
			return err
		}
		r.Profiles = append(r.Profiles, p)
	case r.Name != "" && strings.HasPrefix(line, r.Name+", "):
		total, _, _ := strings.Cut(strings.TrimPrefix(line, r.Name+", "), " MiB")
		mib, err := strconv.ParseInt(total, 10, 64)
		if err != nil {
			return fmt.Errorf("memory.total in %q: %w", line, err)
		}
		r.MemoryMiB = mib
	}
	return nil
}

// ParseProfile reads one answered profile line: key-value pairs ("id 19",
// "MIG 1g.10gb", "slices 1", …) before the placements "[(start, size), …]".
func ParseProfile(line string) (Profile, error) {
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
	for key, dst := range map[string]*int{"profile": &p.Index, "id": &p.ID, "slices": &p.Slices, "inst": &p.Instances, "sm": &p.SMs, "ce": &p.CopyEngines} {
		n, err := strconv.Atoi(kv[key])
		errs, *dst = append(errs, err), n
	}
	mib, err := strconv.ParseInt(kv["memMB"], 10, 64)
	p.MemoryMiB, errs = mib, append(errs, err)
	for _, m := range pair.FindAllStringSubmatch(placements, -1) {
		n := atois(m[1:])
		p.Placements = append(p.Placements, Placement{Start: n[0], Size: n[1]})
	}
	if len(p.Placements) == 0 {
		errs = append(errs, fmt.Errorf("no placements"))
	}
	if err := errors.Join(errs...); err != nil {
		return Profile{}, fmt.Errorf("profile line %q: %w", line, err)
	}
	return p, nil
}

// atois converts strings the regular expressions already matched as digits.
func atois(ss []string) []int {
	out := make([]int, len(ss))
	for i, s := range ss {
		out[i], _ = strconv.Atoi(s)
	}
	return out
}
