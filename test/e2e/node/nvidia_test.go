package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/nvidia-container-toolkit/pkg/nvcdi"
	"github.com/NVIDIA/nvidia-container-toolkit/pkg/nvcdi/transform"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuadmit/gpuadmit/pkg/agent/cdi/cditest"
)

// The hole NVIDIA_VISIBLE_DEVICES opens under NVIDIA's runtime, and its
// closing, on the real node: nvidia-container-runtime in cdi mode, the
// node-wide spec an admin generates with nvidia-ctk for two (fake) GPUs.
//
// With accept-nvidia-visible-devices-envvar-when-unprivileged = true, the
// toolkit's default, a pod that asks for no GPU (so never reaches a device
// plugin or gpuadmit) and sets NVIDIA_VISIBLE_DEVICES=all sees every GPU,
// and the env-only selection gpuadmit's device-plugin mode used to make
// (Allocate's Envs: NVIDIA_VISIBLE_DEVICES=<uuid>, which reaches the runtime
// as any pod's variable does) gives that GPU: the variable is all it takes.
// With = false, the documented setting, neither gets a device: which is why
// the env-only mode had to go, and why gpuadmit now hands the kubelet CDI
// devices. The runtime's own log shows it ran and ignored the variable, and
// a privileged pod under the same handler still gets the GPU its variable
// names (the toolkit trusts privileged containers, which see the host's
// devices anyway): a handler that never ran the runtime, or a spec it could
// not apply, cannot pass the second half. A pod that merely adds
// CAP_SYS_ADMIN gets every GPU too: that is what the toolkit takes for
// privileged.
func TestKubeletNVIDIARuntimeEnvvarHole(t *testing.T) {
	n := requireNode(t)
	accepting, refusing := requireNVIDIARuntime(t, n, true), requireNVIDIARuntime(t, n, false)
	writeNVIDIASpec(t, n, 2)
	gpu1 := cditest.UUID(1)
	all := []string{dev("nvidia0", cditest.MajorGPU, 0), dev("nvidia1", cditest.MajorGPU, 1)}
	gpu1Only := []string{dev("nvidia1", cditest.MajorGPU, 1)}

	tests := map[string]struct {
		rt      NVIDIARuntime
		visible string
		sc      *corev1.SecurityContext // the container's
		want    []string                // GPU device nodes; the control nodes come with any
		// wantIgnored: the runtime logs that it ignored the variable.
		wantIgnored bool
	}{
		"accept=true: a pod asking no GPU sets NVIDIA_VISIBLE_DEVICES=all and sees every GPU": {
			rt: accepting, visible: "all", want: all,
		},
		"accept=true: the env-only selection NVIDIA_VISIBLE_DEVICES=<uuid> gives that GPU": {
			rt: accepting, visible: gpu1, want: gpu1Only,
		},
		"accept=false: the pod setting NVIDIA_VISIBLE_DEVICES=all sees no GPU": {
			rt: refusing, visible: "all", wantIgnored: true,
		},
		"accept=false: the env-only selection gives no GPU either": {
			rt: refusing, visible: gpu1, wantIgnored: true,
		},
		// The control: the same handler and spec do give GPUs where the
		// toolkit trusts the variable, so the two above see none because
		// the setting refused it, not because nothing could be injected.
		"accept=false: a privileged pod's NVIDIA_VISIBLE_DEVICES=<uuid> still selects that GPU": {
			rt: refusing, visible: gpu1, sc: &corev1.SecurityContext{Privileged: ptr.To(true)}, want: gpu1Only,
		},
		// What the toolkit calls privileged is CAP_SYS_ADMIN in the bounding
		// set (internal/config/image/privileged.go): a pod that only adds
		// that capability passes too, so the setting closes the hole only
		// where such pods are refused (Pod Security baseline refuses both).
		"accept=false: an unprivileged pod adding CAP_SYS_ADMIN counts as privileged: NVIDIA_VISIBLE_DEVICES=all sees every GPU": {
			rt: refusing, visible: "all", want: all,
			sc: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			logBefore := fileSize(tc.rt.Log)
			got := devicesSeen(t, n, tc.rt, tc.visible, tc.sc)
			want := tc.want
			if len(want) > 0 {
				want = append(slices.Clone(want), controlNodes()...)
				slices.Sort(want)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("/dev/nvidia* in the container under %s with NVIDIA_VISIBLE_DEVICES=%s (-want +got):\n%s",
					tc.rt.RuntimeClass, tc.visible, diff)
			}
			log := readFrom(t, tc.rt.Log, logBefore)
			const ignored = "Ignoring devices requested by environment variable(s) in unprivileged container: [NVIDIA_VISIBLE_DEVICES]"
			if got := strings.Contains(log, ignored); got != tc.wantIgnored {
				t.Errorf("the runtime's log says %q: %t, want %t; its lines for this pod:\n%s", ignored, got, tc.wantIgnored, log)
			}
		})
	}
}

// requireNVIDIARuntime returns the node's NVIDIA runtime handler with the
// accept setting; without the runtime's binary the test is skipped, saying
// so, or fails under GPUADMIT_REQUIRE_E2E=1.
func requireNVIDIARuntime(t *testing.T, n *Node, acceptEnvvar bool) NVIDIARuntime {
	t.Helper()
	r, err := n.NVIDIARuntime(acceptEnvvar)
	if err != nil {
		if os.Getenv("GPUADMIT_REQUIRE_E2E") != "" {
			t.Fatalf("GPUADMIT_REQUIRE_E2E is set and %v", err)
		}
		t.Skipf("SKIPPED, NOT TESTED: %v", err)
	}
	return r
}

// writeNVIDIASpec writes the node-wide spec of gpus fake GPUs (cditest's
// driver root, its GPU i at minor i) to the node's CDI spec directory as
// `nvidia-ctk cdi generate` would write /etc/cdi/nvidia.yaml: nvcdi in
// nvml mode, kind nvidia.com/gpu, a device per GPU named by index and one
// by UUID, and the device "all". The hooks name the real nvidia-cdi-hook
// from BinDir. nvsandboxutils is off, as in gpuadmit's own specs, since the
// fake driver root has no libnvidia-sandboxutils. The spec is removed when
// the test ends.
func writeNVIDIASpec(t *testing.T, n *Node, gpus int) cditest.Root {
	t.Helper()
	minors := make([]int, gpus)
	for i := range minors {
		minors[i] = i
	}
	root := cditest.NewRoot(t, minors...)
	hook := filepath.Join(n.bin, "nvidia-cdi-hook")
	if _, err := os.Stat(hook); err != nil {
		t.Fatalf("the spec's hooks need %s: %v; build it with hack/node-binaries.sh", hook, err)
	}
	var namers []nvcdi.DeviceNamer
	for _, s := range []string{nvcdi.DeviceNameStrategyIndex, nvcdi.DeviceNameStrategyUUID} {
		namer, err := nvcdi.NewDeviceNamer(s)
		if err != nil {
			t.Fatal(err)
		}
		namers = append(namers, namer)
	}
	lib, err := nvcdi.New(
		nvcdi.WithNvmlLib(cditest.NVML(cditest.GPUs(gpus)...)),
		nvcdi.WithMode(nvcdi.ModeNvml),
		nvcdi.WithDriverRoot(root.Dir),
		nvcdi.WithDevRoot(root.Dir),
		nvcdi.WithNVIDIACDIHookPath(hook),
		nvcdi.WithDeviceNamers(namers...),
		nvcdi.WithMergedDeviceOptions(transform.WithName("all"), transform.WithSkipIfExists(true)),
		nvcdi.WithFeatureFlags(nvcdi.FeatureDisableNvsandboxUtils),
		nvcdi.WithLogger(nvcdiLog{t}),
	)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := lib.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(n.CDISpecDir, "nvidia.yaml")
	if err := spec.Save(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(path) })
	return root
}

// nvcdiLog keeps nvcdi's errors in the test's log and drops the rest: it
// warns about each of the dozens of optional files (graphics libraries,
// firmware, daemons' sockets) a fake driver root lacks, as nvidia-ctk does.
type nvcdiLog struct{ t *testing.T }

func (l nvcdiLog) Errorf(f string, args ...any) { l.t.Logf("nvcdi: "+f, args...) }
func (nvcdiLog) Warningf(string, ...any)        {}
func (nvcdiLog) Infof(string, ...any)           {}
func (nvcdiLog) Debugf(string, ...any)          {}
func (nvcdiLog) Tracef(string, ...any)          {}

// devicesSeen runs a pod under rt with NVIDIA_VISIBLE_DEVICES=visible and
// the container's security context sc (nil: none), that lists, from inside its container, each
// /dev/nvidia* with its major and minor number (hex), and returns the
// list, sorted. (This machine has no /dev/nvidia*, so a privileged
// container, which gets the host's devices, shows only what was injected.)
func devicesSeen(t *testing.T, n *Node, rt NVIDIARuntime, visible string, sc *corev1.SecurityContext) []string {
	t.Helper()
	ctx := context.Background()
	pod := BusyboxPod("default", "nvidia-envvar", "sh", "-c",
		`for d in /dev/nvidia*; do [ -e "$d" ] && stat -c '%n %t:%T' "$d"; done; true`)
	pod.Spec.RuntimeClassName = &rt.RuntimeClass
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "NVIDIA_VISIBLE_DEVICES", Value: visible}}
	pod.Spec.Containers[0].SecurityContext = sc
	if _, err := n.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer deletePod(t, n, pod)
	if _, err := n.WaitPod(ctx, "default", pod.Name, 2*time.Minute, Succeeded); err != nil {
		t.Fatal(err)
	}
	logs, err := n.Logs(ctx, "default", pod.Name, "main")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(logs), "\n")
	if got[0] == "" {
		return nil
	}
	slices.Sort(got)
	return got
}

// dev is how stat -c '%n %t:%T' prints /dev/<name>.
func dev(name string, major, minor int) string {
	return fmt.Sprintf("/dev/%s %x:%x", name, major, minor)
}

// controlNodes are the device nodes every GPU container gets, as cditest
// makes them.
func controlNodes() []string {
	return []string{
		dev("nvidiactl", cditest.MajorGPU, 255),
		dev("nvidia-uvm", cditest.MajorUVM, 0),
		dev("nvidia-uvm-tools", cditest.MajorUVM, 1),
	}
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// readFrom is the file from offset on; a missing file reads as empty.
func readFrom(t *testing.T, path string, offset int64) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b[min(offset, int64(len(b))):])
}
