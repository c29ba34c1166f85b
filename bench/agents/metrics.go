package agents

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Requests counts the API server's requests by verb and resource
// (resource/subresource when there is one), from its
// apiserver_request_total, summed over codes, scopes and components.
type Requests map[RequestKey]float64

// RequestKey is a verb on a resource, as apiserver_request_total labels it.
type RequestKey struct {
	Verb, Resource string
}

// writeVerbs are the verbs that change an object.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "DELETECOLLECTION": true, "APPLY": true}

// IsWrite reports whether k changes an object.
func (k RequestKey) IsWrite() bool { return writeVerbs[k.Verb] }

// ParseRequests reads apiserver_request_total out of a /metrics page.
func ParseRequests(r io.Reader) (Requests, error) {
	p := expfmt.NewTextParser(model.LegacyValidation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	out := Requests{}
	f, ok := families["apiserver_request_total"]
	if !ok {
		return nil, fmt.Errorf("parse metrics: no apiserver_request_total")
	}
	for _, m := range f.GetMetric() {
		var k RequestKey
		sub := ""
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "verb":
				k.Verb = l.GetValue()
			case "resource":
				k.Resource = l.GetValue()
			case "subresource":
				sub = l.GetValue()
			}
		}
		if sub != "" {
			k.Resource += "/" + sub
		}
		out[k] += m.GetCounter().GetValue()
	}
	return out, nil
}

// Since is what happened from before to r: each key's increase, the keys
// that did not change left out.
func (r Requests) Since(before Requests) Requests {
	out := Requests{}
	for k, v := range r {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// Writes sums the writes, on resources for which keep says true (nil: all).
func (r Requests) Writes(keep func(resource string) bool) float64 {
	var n float64
	for k, v := range r {
		if k.IsWrite() && (keep == nil || keep(k.Resource)) {
			n += v
		}
	}
	return n
}

// clockTicks is the kernel's USER_HZ, in which /proc/<pid>/stat counts CPU
// time: 100 on every Linux architecture Go supports.
const clockTicks = 100

// ProcessCPU reads a process's user and system CPU seconds from its stat line.
func ProcessCPU(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read CPU of process %d: %w", pid, err)
	}
	return parseStatCPU(string(data))
}

// parseStatCPU reads utime and stime (fields 14 and 15) of a stat line; the
// command (field 2) is in parentheses and may hold spaces, so fields are
// counted from its closing parenthesis.
func parseStatCPU(stat string) (float64, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("stat line %q: no command", stat)
	}
	fields := strings.Fields(stat[end+1:]) // fields[0] is field 3, the state
	if len(fields) < 13 {
		return 0, fmt.Errorf("stat line %q: %d fields after the command, want at least 13", stat, len(fields))
	}
	var ticks float64
	for _, f := range fields[11:13] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat line: CPU field %q: %w", f, err)
		}
		ticks += float64(v)
	}
	return ticks / clockTicks, nil
}

// FindProcess returns the pid of the process whose command line has every
// one of words (the API server of one control plane: its binary and its port).
func FindProcess(words ...string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("list processes: %w", err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(string(data), "\x00", " ")
		found := true
		for _, w := range words {
			found = found && strings.Contains(cmd, w)
		}
		if found {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no process with %q in its command line", words)
}
