package agent_test

import (
	"maps"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/agent"
	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// TestMPSComponent: with deploy/agent/mps, the agent makes containers MPS
// clients of the daemon's directory, and the daemon runs where the agent
// does, with its pipes and logs where the agent mounts them from.
func TestMPSComponent(t *testing.T) {
	objs := renderMPS(t)
	byName := map[string]*appsv1.DaemonSet{}
	for _, o := range objs["DaemonSet"] {
		ds := o.(*appsv1.DaemonSet)
		byName[ds.Name] = ds
	}
	a, d := byName["gpuadmit-agent"], byName["gpuadmit-mps-control-daemon"]
	if a == nil || d == nil {
		t.Fatalf("DaemonSets %v: want the agent and the MPS control daemon", slices.Collect(maps.Keys(byName)))
	}
	checkFlags(t, a)
	if got, want := argValue(d.Spec.Template.Spec.Containers[0].Args, "--shares-per-gpu"), argValue(a.Spec.Template.Spec.Containers[0].Args, "--shares-per-gpu"); got != want || got == "" {
		t.Errorf("daemon --shares-per-gpu%s, agent's %s: the daemon's limit must be the agent's share", got, want)
	}
	if got := onHost(hostPaths(a.Spec.Template.Spec, a.Spec.Template.Spec.Containers[0]), agent.DefaultMPSRoot+"/"+agent.MPSLimitsFile); got != agent.DefaultMPSRoot+"/"+agent.MPSLimitsFile {
		t.Errorf("the agent reads the daemon's limits at host %q, want %s", got, agent.DefaultMPSRoot+"/"+agent.MPSLimitsFile)
	}
	args := a.Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(args, "--mps") || !slices.Contains(args, "--mps-root="+agent.DefaultMPSRoot) {
		t.Errorf("agent args %v: want --mps and --mps-root=%s", args, agent.DefaultMPSRoot)
	}
	want := map[string]string{allocator.LabelNodeMode: allocator.NodeModeDevicePlugin, "gpuadmit.io/mps": "true"}
	for _, ds := range []*appsv1.DaemonSet{a, d} {
		if diff := cmp.Diff(want, ds.Spec.Template.Spec.NodeSelector); diff != "" {
			t.Errorf("%s node selector (-want +got):\n%s", ds.Name, diff)
		}
	}
	checkDaemon(t, d.Spec.Template.Spec)
}

// checkDaemon: nvidia-cuda-mps-control in the foreground, its pipe and log
// directories in the host's MPS root, the shared memory the agent mounts into
// clients as its /dev/shm, and that tmpfs mounted on the host first.
func checkDaemon(t *testing.T, spec corev1.PodSpec) {
	t.Helper()
	c := spec.Containers[0]
	if !slices.Contains(c.Args, "--mode=mps-control") || !strings.HasPrefix(c.Image, "ghcr.io/gpuadmit/gpuadmit-agent:") {
		t.Errorf("daemon %s %v, want the agent's image in --mode=mps-control", c.Image, c.Args)
	}
	if got := onHost(hostPaths(spec, c), strings.TrimPrefix(argValue(c.Args, "--mps-root"), "=")); got != agent.DefaultMPSRoot {
		t.Errorf("daemon --mps-root is host %q, want %q", got, agent.DefaultMPSRoot)
	}
	host := hostPaths(spec, c)
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	wantHost := map[string]string{
		"CUDA_MPS_PIPE_DIRECTORY": agent.MPSPipeDir(agent.DefaultMPSRoot),
		"CUDA_MPS_LOG_DIRECTORY":  path.Join(agent.DefaultMPSRoot, "log"),
	}
	for name, want := range wantHost {
		if got := onHost(host, env[name]); got != want {
			t.Errorf("%s=%q is %q on the host, want %q", name, env[name], got, want)
		}
	}
	if got := host["/dev/shm"]; got != agent.MPSShmDir(agent.DefaultMPSRoot) {
		t.Errorf("daemon /dev/shm is host %q, want %q", got, agent.MPSShmDir(agent.DefaultMPSRoot))
	}
	init := spec.InitContainers[0]
	if m := init.VolumeMounts[0]; m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationBidirectional {
		t.Errorf("init container %s mounts %+v; the tmpfs must propagate to the host", init.Name, m)
	}
}

// argValue is what follows flag in args ("=4" for --shares-per-gpu=4).
func argValue(args []string, flag string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, flag); ok && strings.HasPrefix(v, "=") {
			return v
		}
	}
	return ""
}

// hostPaths maps a container's mount paths to the host paths behind them.
func hostPaths(spec corev1.PodSpec, c corev1.Container) map[string]string {
	vols := map[string]string{}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			vols[v.Name] = v.HostPath.Path
		}
	}
	out := map[string]string{}
	for _, m := range c.VolumeMounts {
		out[m.MountPath] = vols[m.Name]
	}
	return out
}

// onHost is the host path of a path in the container, through its mounts.
func onHost(host map[string]string, p string) string {
	for dir := p; dir != "/" && dir != "."; dir = path.Dir(dir) {
		if h, ok := host[dir]; ok {
			rel := p[len(dir):]
			return path.Join(h, rel)
		}
	}
	return ""
}
