package admission

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc's CPU times (100 on Linux).
const clockTicks = 100

// cpuReading is CPU time used so far, in seconds: by this process and each
// of its children by command name (gpuadmit, noop-webhook, kube-apiserver,
// etcd, opa, …), and by the whole machine (busy time of all CPUs, every
// process of every user).
type cpuReading struct {
	at      time.Time
	procs   map[string]float64
	machine float64
}

// readCPU reads /proc.
func readCPU() cpuReading {
	r := cpuReading{at: time.Now(), machine: machineBusy()}
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	stats := make([]string, 0, len(paths))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			stats = append(stats, string(b))
		}
	}
	r.procs = attribute(os.Getpid(), stats)
	return r
}

// attribute sums CPU seconds from /proc/<pid>/stat lines by process: self
// as "bench" (it holds only the clients: the webhooks are its children),
// each child of self by its comm (two children of one name add up), and
// nothing else (the machine's other processes, and the children's own
// children, which no component here has).
func attribute(self int, stats []string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range stats {
		name, pid, ppid, cpu, ok := parseStat(s)
		switch {
		case !ok:
		case pid == self:
			out["bench"] += cpu
		case ppid == self:
			out[name] += cpu
		}
	}
	return out
}

// parseStat reads comm, pid, ppid and utime+stime (seconds) from /proc/<pid>/stat.
func parseStat(s string) (string, int, int, float64, bool) {
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return "", 0, 0, 0, false
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(s[:open]))
	f := strings.Fields(s[closing+1:])
	if len(f) < 13 {
		return "", 0, 0, 0, false
	}
	// After comm: state(0) ppid(1) … utime(11) stime(12).
	ppid, _ := strconv.Atoi(f[1])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return s[open+1 : closing], pid, ppid, (ut + st) / clockTicks, true
}

// machineBusy is the busy CPU time of all CPUs from /proc/stat, in seconds.
func machineBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var busy float64
	for i, v := range f[1:] {
		n, _ := strconv.ParseFloat(v, 64)
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy / clockTicks
}

// CPUUse is where CPU time went during a result's rounds.
type CPUUse struct {
	// MsPerPod is CPU milliseconds per created pod by process: bench (this
	// process: the clients only), gpuadmit (cmd/webhook), noop-webhook,
	// kube-apiserver, etcd, opa, kube-controller (comm's 15 characters of
	// kube-controller-manager).
	MsPerPod map[string]float64 `json:"msPerPod"`
	// TotalMsPerPod is all of those processes together, rounded once from
	// their seconds (not summed from MsPerPod's rounded figures).
	TotalMsPerPod float64 `json:"totalMsPerPod"`
	// OtherCores is the average number of CPUs busy with everything else on
	// the machine (other users' work): the background noise.
	OtherCores float64 `json:"otherCores"`
	// Seconds is the wall time the readings span.
	Seconds float64 `json:"seconds"`

	procs   map[string]float64
	machine float64
}

// add accumulates the CPU time between two readings.
func (u *CPUUse) add(before, after cpuReading) {
	if u.procs == nil {
		u.procs = map[string]float64{}
	}
	var ours float64
	for name, t := range after.procs {
		d := t - before.procs[name]
		u.procs[name] += d
		ours += d
	}
	u.machine += after.machine - before.machine - ours
	u.Seconds += after.at.Sub(before.at).Seconds()
}

// roundUse is the CPU time between two readings of one round, per created
// pod by process, and its total.
func roundUse(before, after cpuReading, pods int) (map[string]float64, float64) {
	var u CPUUse
	u.add(before, after)
	u.summarise(pods)
	return u.MsPerPod, u.TotalMsPerPod
}

func (u *CPUUse) summarise(pods int) {
	u.MsPerPod = map[string]float64{}
	var total float64
	for name, t := range u.procs {
		if t > 0 {
			u.MsPerPod[name] = round2(1000 * t / float64(max(pods, 1)))
			total += t
		}
	}
	u.TotalMsPerPod = round2(1000 * total / float64(max(pods, 1)))
	if u.Seconds > 0 {
		u.OtherCores = round2(max(u.machine, 0) / u.Seconds)
	}
}

func round2(x float64) float64 { return float64(int64(x*100+0.5)) / 100 }
