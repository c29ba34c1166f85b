package scale

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/gpuadmit/gpuadmit/bench/admission"
)

// webhookProc is gpuadmit's webhook process: its pid, its /metrics and its
// /debug/pprof.
type webhookProc struct {
	pid     int
	metrics string // URL of /metrics
	pprof   string // host:port of /debug/pprof
}

// memoryLimit is the memory limit the process was started with, from its
// environment: the value of its last GPUADMIT_MEMORY_LIMIT.
func (w *webhookProc) memoryLimit() (int64, error) {
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", w.pid))
	if err != nil {
		return 0, fmt.Errorf("read the webhook's environment: %w", err)
	}
	v, found := "", false
	for _, kv := range bytes.Split(env, []byte{0}) {
		if name, value, ok := strings.Cut(string(kv), "="); ok && name == webhookMemoryLimitEnv {
			v, found = value, true
		}
	}
	if !found {
		return 0, fmt.Errorf("the webhook's process has no %s in its environment", webhookMemoryLimitEnv)
	}
	limit, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("the webhook's %s=%q: %w", webhookMemoryLimitEnv, v, err)
	}
	return limit, nil
}

// memory reads the process's resident memory from /proc first, then its
// Go heap after a collection (the heap profile with gc=1), then its cache
// object counts.
func (w *webhookProc) memory(ctx context.Context) (Memory, error) {
	var m Memory
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", w.pid))
	if err != nil {
		return m, fmt.Errorf("read the webhook's memory: %w", err)
	}
	if m.RSSMB, err = statusMB(status, "VmRSS"); err != nil {
		return m, err
	}
	if m.PeakRSSMB, err = statusMB(status, "VmHWM"); err != nil {
		return m, err
	}
	body, err := admission.Get(ctx, http.DefaultClient, "http://"+w.pprof+"/debug/pprof/heap?debug=1&gc=1")
	if err != nil {
		return m, fmt.Errorf("read the webhook's heap: %w", err)
	}
	stats := memStats(body)
	for name, dst := range map[string]*float64{"HeapAlloc": &m.HeapMB, "HeapInuse": &m.HeapInuseMB, "Sys": &m.SysMB} {
		v, ok := stats[name]
		if !ok {
			return m, fmt.Errorf("the webhook's heap profile has no %s", name)
		}
		*dst = v / 1e6
	}
	met, err := admission.ScrapeMetrics(ctx, w.metrics)
	if err != nil {
		return m, err
	}
	if !met.Has(metricCacheObjects) {
		return m, fmt.Errorf("the webhook's /metrics has no %s", metricCacheObjects)
	}
	m.Cache = met.By(metricCacheObjects, "kind")
	m.Formula = formulaOf(m.Cache["Node"], m.Cache["ResourceSlice"], m.Cache["Pod"])
	return m, nil
}

// statusMB reads a kB field of /proc/<pid>/status in MB (10^6 bytes).
func statusMB(status []byte, field string) (float64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
		if err != nil {
			return 0, fmt.Errorf("%s %q: %w", field, rest, err)
		}
		return kb * 1024 / 1e6, nil
	}
	return 0, fmt.Errorf("no %s in /proc status", field)
}

// memStats reads the "# Name = value" lines runtime/pprof ends a debug
// heap profile with (runtime.MemStats).
func memStats(profile []byte) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(profile))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "# ")
		if !ok {
			continue
		}
		name, value, ok := strings.Cut(line, " = ")
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[name] = v
		}
	}
	return out
}

// loadavg is the machine's load average, as /proc/loadavg's first three fields.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// Machine is where a run ran.
type Machine struct {
	CPUs       int
	GoVersion  string
	LoadBefore string
	LoadAfter  string
}

func machineOf() Machine {
	return Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), LoadBefore: loadavg()}
}
