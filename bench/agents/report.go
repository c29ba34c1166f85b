package agents

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// ExpectedChangeWrites is what one agent that lost a GPU writes, once: the
// annotation (PATCH nodes), the accounting capacity (PATCH nodes/status)
// and its one ResourceSlice (PUT resourceslices).
var ExpectedChangeWrites = Requests{
	{Verb: "PATCH", Resource: "nodes"}:        1,
	{Verb: "PATCH", Resource: "nodes/status"}: 1,
	{Verb: "PUT", Resource: "resourceslices"}: 1,
}

// agentResources are the resources an agent touches.
func agentResource(resource string) bool {
	return resource == "nodes" || resource == "nodes/status" || resource == "resourceslices"
}

// Markdown prints one row per level, then each phase's requests.
func Markdown(w io.Writer, levels []Level) {
	fmt.Fprintln(w, "| agents | steady: writes / agent / min | steady: reads / agent / min | steady: API server CPU s / min | change: agents that lost a GPU | change: writes (expected) | change: API server CPU s / min |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- |")
	for _, l := range levels {
		if l.Err != "" {
			fmt.Fprintf(w, "| %d | stopped: %s | | | | | |\n", l.Agents, l.Err)
			continue
		}
		per := func(v, minutes float64) float64 { return v / float64(l.Agents) / minutes }
		fmt.Fprintf(w, "| %d | %.3f | %.2f | %.2f | %d | %.0f (%d) | %.2f |\n", l.Agents,
			per(l.Steady.Writes(agentResource), l.SteadyMinutes), per(l.Steady.reads(), l.SteadyMinutes),
			l.SteadyCPU/l.SteadyMinutes, l.Lost, l.Change.Writes(agentResource),
			l.Lost*int(ExpectedChangeWrites.Writes(nil)), l.ChangeCPU/l.ChangeMinutes)
	}
	for _, l := range levels {
		if l.Err == "" {
			fmt.Fprintf(w, "\n%d agents, steady state (%.1f min): %s\n", l.Agents, l.SteadyMinutes, l.Steady)
			fmt.Fprintf(w, "%d agents, %d lost a GPU (%.1f min): %s\n", l.Agents, l.Lost, l.ChangeMinutes, l.Change)
		}
	}
}

// reads sums the agents' reads (GET, LIST, WATCH) of their resources.
func (r Requests) reads() float64 {
	var n float64
	for k, v := range r {
		if !k.IsWrite() && agentResource(k.Resource) {
			n += v
		}
	}
	return n
}

// String lists the requests as verb resource=count, sorted.
func (r Requests) String() string {
	var out []string
	for k, v := range r {
		out = append(out, fmt.Sprintf("%s %s=%.0f", k.Verb, k.Resource, v))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
