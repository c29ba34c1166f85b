package node

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpuadmit/gpuadmit/internal/fakegpu"
	"github.com/gpuadmit/gpuadmit/pkg/agent"
	"github.com/gpuadmit/gpuadmit/pkg/agent/dra"
	"github.com/gpuadmit/gpuadmit/pkg/claim"
)

// migProfile is the profile of migGPU's two GPU instances.
const migProfile = "3g.40gb"

// migGPU is a fake H100 in MIG mode with two 3g.40gb GPU instances, IDs 1
// and 2, each with one compute instance (ID 0) that takes all of it.
var migGPU = fakegpu.GPUConfig{Reading: h100, MIG: []string{migProfile, migProfile}}

// migDevices are the devices the DRA driver publishes for migGPU as GPU 0
// beside a whole H100 as GPU 1, none tainted.
func migDevices() map[string][]string {
	return map[string][]string{
		dra.MIGDeviceName(0, migProfile, 1): nil,
		dra.MIGDeviceName(0, migProfile, 2): nil,
		dra.GPUDeviceName(1):                nil,
	}
}

// migNode runs the DRA driver over migGPU (GPU 0) and a whole H100 (GPU 1)
// until the test ends, waits until it publishes both instances and the
// GPU, and creates the claim template of one MIG device of migProfile
// through its DeviceClass (dra.MIGClass), as gpuadmit's controller.
func migNode(t *testing.T, args ...string) (*Node, *FakeGPUs, string) {
	t.Helper()
	n := requireNode(t)
	gpus := newFakeGPUs(t, n, migGPU, h100GPU)
	deployAgent(t, n, draMode.dir, draMode.name, draMode.labels, gpus, args...)
	waitDevices(context.Background(), t, n, "as published", migDevices())
	return n, gpus, createTemplate(t, n, migTemplate(migProfile))
}

// migTemplate is the template of one MIG device of profile, a request
// through gpuadmit's DeviceClass of that profile (the class behind
// nvidia.com/mig-<profile> on DRA pools, whose claims the scheduler makes
// in a cluster), labelled as gpuadmit's, the only templates its
// controller's identity may write (deploy/base/controller-policy.yaml).
func migTemplate(profile string) *resourceapi.ResourceClaimTemplate {
	tmpl := &resourceapi.ResourceClaimTemplate{Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{
		Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: claim.Request,
			Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: dra.MIGClass(profile),
				AllocationMode:  resourceapi.DeviceAllocationModeExactCount, Count: 1,
			},
		}}},
	}}}
	tmpl.Name, tmpl.Namespace = "gpuadmit-mig-"+strings.ReplaceAll(profile, ".", "-"), gpuNamespace
	tmpl.Labels = map[string]string{claim.ManagedBy: "gpuadmit"}
	return tmpl
}

// claimedInstance is the GPU instance ID of migGPU's MIG device allocated
// to the pod's claim; it fails the test where the claim got another device.
func claimedInstance(ctx context.Context, t *testing.T, n *Node, pod *corev1.Pod) int {
	t.Helper()
	c := podClaim(ctx, t, n, pod)
	if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 {
		t.Fatalf("claim %s allocation: %+v", c.Name, c.Status.Allocation)
	}
	got := c.Status.Allocation.Devices.Results[0].Device
	for _, gi := range []int{1, 2} {
		if got == dra.MIGDeviceName(0, migProfile, gi) {
			return gi
		}
	}
	t.Fatalf("claim %s got device %q, not a %s instance of GPU 0", c.Name, got, migProfile)
	return 0
}

// migCapNodes are the device nodes of the capabilities of GPU instance gi
// on GPU 0 and of its compute instance 0, container paths.
func migCapNodes(gi int) []string {
	return []string{fakegpu.CapPath(fakegpu.GICapMinor(0, gi)), fakegpu.CapPath(fakegpu.CICapMinor(0, gi, 0))}
}

// migView is what a container given GPU instance gi of migGPU (GPU 0)
// sees: what a container given the whole GPU 0 sees (its parent's device
// node, nvidiactl, UVM, the libraries, the hooks' work: gpuView), the two
// capability device nodes of its GPU and compute instance, and the
// instance's memory as its limit.
func migView(t *testing.T, gpus *FakeGPUs, gi int) []string {
	t.Helper()
	want := gpuView(gpus, 0, "NVIDIA_VISIBLE_DEVICES=void", "NVIDIA_CTK_LIBCUDA_DIR=/usr/lib64",
		fmt.Sprintf("GPUADMIT_MEMORY_LIMIT_MIB=%d", migMiB(t)))
	for _, p := range migCapNodes(gi) {
		var minor int
		if _, err := fmt.Sscanf(filepath.Base(p), "nvidia-cap%d", &minor); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("dev %s %x:%x", p, fakegpu.MajorCaps, minor))
	}
	slices.Sort(want)
	return want
}

// migMiB is migProfile's memory as the H100 reading reports it (40448).
func migMiB(t *testing.T) int64 {
	t.Helper()
	r, err := fakegpu.ReadReading(filepath.Join(root, "pkg/allocator/testdata/nvml", h100))
	if err != nil {
		t.Fatal(err)
	}
	mib, ok := r.ProfileMiB(migProfile)
	if !ok {
		t.Fatalf("the H100 reading has no profile %s", migProfile)
	}
	return mib
}

// Two pods each holding a claim of one MIG device (3g.40gb, through
// gpuadmit's DeviceClass for it) on a GPU in MIG mode run on the real node,
// each on its own GPU instance: inside the container, the parent GPU's
// device node, the nvidia-caps device nodes of its own GPU instance's and
// compute instance's access (the minors nvcdi read from the driver's
// mig-minors file) and none of the other instance's, nvidiactl and UVM, the
// driver's libraries and the hooks' work, and no node of the other GPU;
// and the claim's CDI spec names exactly those device nodes for the
// device, and the control nodes, libraries and hooks in its own edits.
func TestKubeletDRAMIGPodGetsItsInstance(t *testing.T) {
	n, gpus, tmpl := migNode(t)
	ctx := context.Background()
	seen := map[int]string{}
	for _, name := range []string{"dra-mig-a", "dra-mig-b"} {
		pod := claimPod(name, tmpl)
		runPod(t, n, pod)
		gi := claimedInstance(ctx, t, n, pod)
		if diff := cmp.Diff(migView(t, gpus, gi), containerView(t, n, pod)); diff != "" {
			t.Errorf("pod %s, given GPU instance %d, sees (-want +got):\n%s", name, gi, diff)
		}
		checkMIGSpec(t, gpus, podClaim(ctx, t, n, pod), gi)
		if other, ok := seen[gi]; ok {
			t.Errorf("pods %s and %s both got GPU instance %d", other, name, gi)
		}
		seen[gi] = name
	}
}

// checkMIGSpec checks the CDI spec the driver wrote for claim c, given GPU
// instance gi of GPU 0: one device whose device nodes are the parent GPU's
// and the instance's capabilities (host paths in the fake root) and whose
// variable is its memory limit; the spec's own edits hold the control
// nodes, the driver's libraries and nvidia-cdi-hook's hooks.
func checkMIGSpec(t *testing.T, gpus *FakeGPUs, c *resourceapi.ResourceClaim, gi int) {
	t.Helper()
	b, err := os.ReadFile(claimSpecFile(c.UID))
	if err != nil {
		t.Fatalf("claim %s's CDI spec: %v", c.Name, err)
	}
	var spec cdispec.Spec
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatalf("claim %s's CDI spec: %v", c.Name, err)
	}
	if len(spec.Devices) != 1 {
		t.Fatalf("claim %s's CDI spec has %d devices, want 1:\n%s", c.Name, len(spec.Devices), b)
	}
	dev := spec.Devices[0].ContainerEdits
	wantNodes := append([]string{"/dev/nvidia0"}, migCapNodes(gi)...)
	var want, got []string
	for _, p := range wantNodes {
		want = append(want, p+" <- "+filepath.Join(gpus.Dir, p))
	}
	for _, d := range dev.DeviceNodes {
		got = append(got, d.Path+" <- "+d.HostPath)
	}
	slices.Sort(want)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("claim %s's device (GPU instance %d) device nodes (-want +got):\n%s", c.Name, gi, diff)
	}
	if wantEnv := []string{fmt.Sprintf("%s=%d", agent.EnvMemoryLimitMiB, migMiB(t))}; !cmp.Equal(wantEnv, dev.Env) {
		t.Errorf("claim %s's device variables = %q, want %q", c.Name, dev.Env, wantEnv)
	}
	common := spec.ContainerEdits
	var nodes, mounts, hooks []string
	for _, d := range common.DeviceNodes {
		nodes = append(nodes, d.Path)
	}
	for _, m := range common.Mounts {
		mounts = append(mounts, m.ContainerPath)
	}
	for _, h := range common.Hooks {
		if h.Path == gpus.HookPath && len(h.Args) > 1 {
			hooks = append(hooks, h.Args[1])
		}
	}
	for what, w := range map[string]struct{ have, want []string }{
		"device nodes": {nodes, []string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"}},
		"mounts":       {mounts, []string{"/usr/lib64/" + filepath.Base(gpus.Lib("libcuda.so")), "/usr/lib64/" + filepath.Base(gpus.Lib("libnvidia-ml.so"))}},
		"hooks":        {hooks, []string{"create-symlinks", "update-ldcache"}},
	} {
		for _, x := range w.want {
			if !slices.Contains(w.have, x) {
				t.Errorf("claim %s's CDI spec's own %s %q lack %s", c.Name, what, w.have, x)
			}
		}
	}
}

// A GPU instance deleted (the fake NVML's control file) under the claim of
// a running pod is gone: the DRA driver keeps publishing its device, and
// only that one, with the NoExecute taint gpu.gpuadmit.io/gone (the other
// instance and the whole GPU stay as they were), and the controller-
// manager's device-taint eviction controller evicts the pod within
// evictionBound (its DisruptionTarget condition and event name that
// controller): the pod does not hang on an instance that is no longer
// there.
func TestKubeletDRAVanishedMIGInstanceEvictsItsPod(t *testing.T) {
	n, gpus, tmpl := migNode(t, "--resync=2s")
	ctx := context.Background()
	pod := claimPod("dra-on-vanished-mig", tmpl)
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	runPod(t, n, pod)
	gi := claimedInstance(ctx, t, n, pod)
	evicted := watchEviction(ctx, t, n, pod)

	if err := fakegpu.WriteControl(gpus.Control, fakegpu.Control{GoneInstances: map[string][]uint32{gpus.UUIDs[0]: {uint32(gi)}}}); err != nil {
		t.Fatal(err)
	}
	what := fmt.Sprintf("GPU instance %d, held by pod %s's claim, was deleted", gi, pod.Name)
	want := migDevices()
	want[dra.MIGDeviceName(0, migProfile, gi)] = []string{dra.TaintGone + ":" + string(resourceapi.DeviceTaintEffectNoExecute)}
	waitDevices(ctx, t, n, "after "+what, want)
	evicted(what)
}
