package admission

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
)

// MachineNow describes this machine and its load now, as a report of Run does.
func MachineNow() Machine { return machine() }

// LoadAvg is /proc/loadavg now.
func LoadAvg() string { return loadavg() }

// machine describes this machine and its load now.
func machine() Machine {
	m := Machine{Cores: runtime.NumCPU(), LoadBefore: loadavg()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.CPU = procField("/proc/cpuinfo", "model name")
	if kb, err := strconv.ParseInt(strings.Fields(procField("/proc/meminfo", "MemTotal") + " 0")[0], 10, 64); err == nil {
		m.MemoryGiB = int((kb + 1<<19) >> 20)
	}
	return m
}

// procField is the value of the first "key: value" line of a /proc file.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// loadavg is /proc/loadavg: the 1, 5 and 15 minute load averages and more.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// versions asks the binaries and this build what ran.
func versions(o Options) Versions {
	v := Versions{Go: runtime.Version(), ControllerRuntime: moduleVersion("sigs.k8s.io/controller-runtime")}
	v.Kubernetes = firstLine(o.BinDir+"/kube-apiserver", "--version")
	v.Etcd = firstLine(o.BinDir+"/etcd", "--version")
	if o.OPA != "" {
		v.OPA = firstLine(o.OPA, "version")
	}
	return v
}

func firstLine(bin string, args ...string) string {
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}

func moduleVersion(path string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range info.Deps {
		if d.Path == path {
			return d.Version
		}
	}
	return ""
}
