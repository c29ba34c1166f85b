package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/gpuadmit/gpuadmit/internal/fakegpu"
	"github.com/gpuadmit/gpuadmit/pkg/agent"
	"github.com/gpuadmit/gpuadmit/pkg/agent/dra"
	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/claim"
)

// The GPU pods run in kube-system, which gpuadmit's webhook (running in
// this control plane) leaves alone by its namespaceSelector: they are
// written as the webhook would have rewritten them (the final resource
// gpuadmit.io/gpu-mem; a claim of package claim's spec), so what is tested
// is the node side alone.
const gpuNamespace = metav1.NamespaceSystem

const h100 = "h100-80gb-hbm3-raw.txt"

// h100GPU is a fake GPU answering as the H100 reading, MIG off.
var h100GPU = fakegpu.GPUConfig{Reading: h100}

// sharesPerGPU is deploy/agent's --shares-per-gpu.
const sharesPerGPU = 4

// agentMode is one of the agent's DaemonSets, what selects the node for
// it, and how to tell it offers the node's GPUs.
type agentMode struct {
	dir, name string
	labels    map[string]string
	ready     func(ctx context.Context, t *testing.T, n *Node, gpus *FakeGPUs)
}

var (
	devicePluginMode = agentMode{
		dir: "deploy/agent", name: "gpuadmit-agent",
		labels: map[string]string{"gpuadmit.io/node-mode": "device-plugin", "nvidia.com/gpu.present": "true"},
		ready: func(ctx context.Context, t *testing.T, n *Node, gpus *FakeGPUs) {
			waitAllocatable(ctx, t, n, agent.ResourceShare, int64(len(gpus.UUIDs))*sharesPerGPU)
		},
	}
	draMode = agentMode{
		dir: "deploy/dra", name: "gpuadmit-agent-dra",
		labels: map[string]string{"gpuadmit.io/node-mode": "dra"},
		ready: func(ctx context.Context, t *testing.T, n *Node, gpus *FakeGPUs) {
			waitSliceDevices(ctx, t, n, len(gpus.UUIDs))
		},
	}
)

// twoH100s runs the agent in mode over two fake H100s, MIG off, until the
// test ends, and waits until it offers both.
func twoH100s(t *testing.T, mode agentMode) (*Node, *FakeGPUs, *Agent) {
	t.Helper()
	n := requireNode(t)
	gpus := newFakeGPUs(t, n, h100GPU, h100GPU)
	a := deployAgent(t, n, mode.dir, mode.name, mode.labels, gpus)
	mode.ready(context.Background(), t, n, gpus)
	return n, gpus, a
}

// h100MiB is the H100 reading's total memory.
func h100MiB(t *testing.T) int64 {
	t.Helper()
	r, err := fakegpu.ReadReading(filepath.Join(root, "pkg/allocator/testdata/nvml", h100))
	if err != nil {
		t.Fatal(err)
	}
	return r.MemoryMiB()
}

// sharePod is a busybox pod asking a whole GPU's shares, as the webhook
// writes a share on a device-plugin pool.
func sharePod(name string) *corev1.Pod {
	pod := BusyboxPod(gpuNamespace, name, "sleep", "3600")
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{agent.ResourceShare: *resource.NewQuantity(sharesPerGPU, resource.DecimalSI)}
	return pod
}

// In device-plugin mode, the agent runs as deploy/agent's DaemonSet and
// each of two pods asking a whole GPU's shares gets one GPU through the CDI
// device Allocate names: inside the container, that GPU's device node and
// no other GPU's, the control and UVM nodes, the driver's libraries
// mounted and linked by the real nvidia-cdi-hook, and the variables of the
// spec and of Allocate; the two pods' GPUs differ, and a pod asking none
// sees nothing of the driver.
func TestKubeletDevicePluginGivesItsGPU(t *testing.T) {
	n, gpus, _ := twoH100s(t, devicePluginMode)
	twoPodsTwoGPUs(t, n, gpus, "")
	noGPU(t, n)
}

// A pod written as a user writes it (gpuadmit.io/gpu-memory: 8Gi, in a
// namespace gpuadmit's webhook serves) takes the whole path on the real
// node: the webhook in this control plane rewrites it into one share of
// the device-plugin pool of the node's model, the scheduler binds it, the
// kubelet has the agent allocate the share, and the container sees that
// GPU alone, its memory limit one share.
func TestKubeletDevicePluginPodThroughTheWebhook(t *testing.T) {
	n, gpus, _ := twoH100s(t, devicePluginMode)
	pod := webhookPod(t, n, "NVIDIA H100 80GB HBM3", BusyboxImage)
	if q := pod.Spec.Containers[0].Resources.Limits[agent.ResourceShare]; q.Value() != 1 {
		t.Errorf("the webhook asks %s shares for 8 GiB, want 1 (a quarter of an H100)", q.String())
	}
	i := allocatedGPU(t, n, gpus, pod)
	want := gpuView(gpus, i, "NVIDIA_VISIBLE_DEVICES=void", "NVIDIA_CTK_LIBCUDA_DIR=/usr/lib64",
		fmt.Sprintf("GPUADMIT_MEMORY_LIMIT_MIB=%d", h100MiB(t)/sharesPerGPU))
	if diff := cmp.Diff(want, containerView(t, n, pod)); diff != "" {
		t.Errorf("pod given GPU %d (%s) through the webhook sees (-want +got):\n%s", i, gpus.UUIDs[i], diff)
	}
}

// nvidiaRuntimeClass is the RuntimeClass whose handler is NVIDIA's
// nvidia-container-runtime in cdi mode with
// accept-nvidia-visible-devices-envvar-when-unprivileged = false, the
// setting docs/node.md tells nodes to use: the node creates it where
// hack/node-binaries.sh built that runtime (nvidia.go, on the branch that
// adds it).
const nvidiaRuntimeClass = "nvidia"

// Under NVIDIA's runtime with accept-nvidia-visible-devices-envvar-when-
// unprivileged = false, gpuadmit's device-plugin pods still get exactly
// their GPU, through the CDI devices the kubelet passes on (the runtime
// adds nothing for NVIDIA_VISIBLE_DEVICES=void): the documented node
// setting closes the variable's hole without taking gpuadmit's GPUs away.
// It skips where the node has no such RuntimeClass.
func TestKubeletDevicePluginGivesItsGPUUnderNVIDIARuntime(t *testing.T) {
	n := requireNode(t)
	if _, err := n.Client.NodeV1().RuntimeClasses().Get(context.Background(), nvidiaRuntimeClass, metav1.GetOptions{}); err != nil {
		t.Skipf("SKIPPED, NOT TESTED: no RuntimeClass %s (NVIDIA's runtime) on this node: %v", nvidiaRuntimeClass, err)
	}
	gpus := newFakeGPUs(t, n, h100GPU, h100GPU)
	deployAgent(t, n, devicePluginMode.dir, devicePluginMode.name, devicePluginMode.labels, gpus)
	devicePluginMode.ready(context.Background(), t, n, gpus)
	twoPodsTwoGPUs(t, n, gpus, nvidiaRuntimeClass)
}

// twoPodsTwoGPUs runs two pods each asking a whole GPU's shares, under
// runtimeClass (empty: the node's default, runc), and checks that each
// sees exactly the GPU the kubelet gave it, and that the two differ.
func twoPodsTwoGPUs(t *testing.T, n *Node, gpus *FakeGPUs, runtimeClass string) {
	t.Helper()
	memoryMiB := h100MiB(t)
	seen := map[int]string{}
	for _, name := range []string{"dp-gpu-a", "dp-gpu-b"} {
		pod := sharePod(name)
		if runtimeClass != "" {
			pod.Spec.RuntimeClassName = ptr.To(runtimeClass)
		}
		runPod(t, n, pod)
		got := containerView(t, n, pod)
		i := allocatedGPU(t, n, gpus, pod)
		want := gpuView(gpus, i, "NVIDIA_VISIBLE_DEVICES=void", "NVIDIA_CTK_LIBCUDA_DIR=/usr/lib64",
			fmt.Sprintf("GPUADMIT_MEMORY_LIMIT_MIB=%d", memoryMiB/sharesPerGPU*sharesPerGPU))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("pod %s, given GPU %d (%s), sees (-want +got):\n%s", name, i, gpus.UUIDs[i], diff)
		}
		if other, ok := seen[i]; ok {
			t.Errorf("pods %s and %s both got GPU %d; each asked a whole GPU's shares", other, name, i)
		}
		seen[i] = name
	}
}

// In DRA mode, the agent runs as deploy/dra's DaemonSet and publishes its
// GPUs in a ResourceSlice; each of two pods whose claim asks more than half
// a GPU's memory gets the GPU the scheduler allocated, through the claim's
// CDI spec the agent wrote: inside the container, that GPU's device node
// and no other's, the control and UVM nodes, the driver's libraries
// mounted and linked by the real nvidia-cdi-hook, and the variables, the
// memory limit being the capacity the claim consumed.
func TestKubeletDRAGivesItsGPU(t *testing.T) {
	n, gpus, _ := twoH100s(t, draMode)
	ctx := context.Background()
	mib := h100MiB(t)/2 + 1 // two cannot share a GPU
	tmpl := shareTemplate(t, n, mib)
	seen := map[int]string{}
	for _, name := range []string{"dra-gpu-a", "dra-gpu-b"} {
		pod := claimPod(name, tmpl)
		runPod(t, n, pod)
		got := containerView(t, n, pod)
		i, consumed := claimedGPU(ctx, t, n, pod)
		want := gpuView(gpus, i, "NVIDIA_VISIBLE_DEVICES=void", "NVIDIA_CTK_LIBCUDA_DIR=/usr/lib64",
			fmt.Sprintf("GPUADMIT_MEMORY_LIMIT_MIB=%d", consumed))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("pod %s, given GPU %d (%s), sees (-want +got):\n%s", name, i, gpus.UUIDs[i], diff)
		}
		if consumed < mib {
			t.Errorf("pod %s's claim consumed %d MiB, less than the %d MiB it asked", name, consumed, mib)
		}
		if other, ok := seen[i]; ok {
			t.Errorf("pods %s and %s both got GPU %d; each asked more than half of it", other, name, i)
		}
		seen[i] = name
	}
	noGPU(t, n)
}

// shareTemplate creates gpuadmit's ResourceClaimTemplate of a share of mib
// MiB in the GPU pods' namespace, until the test ends. Only gpuadmit writes
// claims of its DeviceClasses (deploy/dra's ValidatingAdmissionPolicy
// gpuadmit-dra-claims, checked by user name): the template is the one
// gpuadmit's controller writes for the share (package claim), created with
// that identity (its RBAC is not installed here, hence the group).
func shareTemplate(t *testing.T, n *Node, mib int64) string {
	t.Helper()
	return createTemplate(t, n, claim.Template(gpuNamespace, mib))
}

// createTemplate creates tmpl as gpuadmit's controller, until the test
// ends, and returns its name: only gpuadmit writes claims of its
// DeviceClasses (shareTemplate says more).
func createTemplate(t *testing.T, n *Node, tmpl *resourceapi.ResourceClaimTemplate) string {
	t.Helper()
	ctx := context.Background()
	cfg := rest.CopyConfig(n.Cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:gpuadmit-system:gpuadmit-controller", Groups: []string{"system:masters", "system:authenticated"}}
	asController, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := asController.ResourceV1().ResourceClaimTemplates(tmpl.Namespace).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = n.Client.ResourceV1().ResourceClaimTemplates(tmpl.Namespace).Delete(ctx, tmpl.Name, metav1.DeleteOptions{})
	})
	return tmpl.Name
}

// claimPod is a busybox pod whose container holds a claim from the
// template, as the webhook writes a share on a DRA pool (pkg/mutate's
// addClaims).
func claimPod(name, template string) *corev1.Pod {
	pod := BusyboxPod(gpuNamespace, name, "sleep", "3600")
	pod.Labels = map[string]string{claim.LabelShare: "true"}
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: claim.PodClaimPrefix + "main", ResourceClaimTemplateName: ptr.To(template)}}
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: claim.PodClaimPrefix + "main"}}
	return pod
}

// agentImage builds and imports the agent's image once for all tests.
var agentImage struct {
	once sync.Once
	err  error
}

func newFakeGPUs(t *testing.T, n *Node, gpus ...fakegpu.GPUConfig) *FakeGPUs {
	t.Helper()
	agentImage.once.Do(func() { agentImage.err = n.BuildAgentImage(root) })
	if agentImage.err != nil {
		t.Fatal(agentImage.err)
	}
	if err := n.WaitServiceAccount(context.Background(), gpuNamespace); err != nil {
		t.Fatal(err)
	}
	g, err := n.NewFakeGPUs(root, gpus...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Unmount(); err != nil {
			t.Error(err)
		}
	})
	return g
}

// deployAgent runs the agent's DaemonSet until the test ends; where it did
// not come up, the agent's log says why.
func deployAgent(t *testing.T, n *Node, dir, name string, labels map[string]string, driver DriverRoot, args ...string) *Agent {
	t.Helper()
	ctx := context.Background()
	a, err := n.DeployAgent(ctx, root, dir, name, driver, labels, args...)
	if errors.Is(err, ErrUnavailable) && os.Getenv("GPUADMIT_REQUIRE_E2E") == "" {
		t.Skipf("SKIPPED, NOT TESTED: %v", err)
	}
	if a != nil {
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("agent log:\n%s", agentLog(n, a))
			}
			if err := n.RemoveAgent(ctx, a, labels); err != nil {
				t.Error(err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func agentLog(n *Node, a *Agent) string {
	ctx := context.Background()
	pods, err := n.Client.CoreV1().Pods(a.DaemonSet.Namespace).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(a.DaemonSet.Spec.Selector)})
	if err != nil || len(pods.Items) == 0 {
		return fmt.Sprintf("no agent pod: %v", err)
	}
	var b strings.Builder
	for _, p := range pods.Items {
		logs, err := n.Logs(ctx, p.Namespace, p.Name, "agent")
		fmt.Fprintf(&b, "--- %s (%s) %v\n%s", p.Name, podState(&p), err, lastLines(logs, 60))
	}
	return b.String()
}

func lastLines(s string, k int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-k):], "\n")
}

// runPod creates the pod, deletes it when the test ends, and waits until it runs.
func runPod(t *testing.T, n *Node, pod *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	if _, err := n.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deletePod(t, n, pod) })
	if _, err := n.WaitPod(ctx, pod.Namespace, pod.Name, 2*time.Minute, Running); err != nil {
		t.Fatal(err)
	}
}

// viewScript prints what a container sees of a GPU driver, one fact a
// line: each NVIDIA device node (MIG capabilities' in /dev/nvidia-caps
// too) with its major:minor (hex, as stat prints it), each file and link in /usr/lib64, the variables NVIDIA's
// and gpuadmit's specs set, and what the specs' hooks wrote in the
// container: the ld.so.cache of update-ldcache (the host's ldconfig, run
// in the container's root: the image needs none), and
// update-application-profile's profile, whose mask holds the minor of each
// GPU device node the hook found in the container's /dev; and the files of
// an MPS control daemon's pipe directory and shared memory, where the
// device plugin mounts them in MPS mode.
const viewScript = `for f in /dev/nvidia* /dev/nvidia-caps/*; do [ -c "$f" ] && stat -c "dev %n %t:%T" "$f"; done
for f in /usr/lib64/*; do if [ -L "$f" ]; then echo "link $f -> $(readlink "$f")"; elif [ -e "$f" ]; then echo "file $f"; fi; done
env | grep -E '^(NVIDIA_|GPUADMIT_|CUDA_)' | sed 's/^/env /'
[ -s /etc/ld.so.cache ] && echo "ld.so.cache"
f=/etc/nvidia/nvidia-application-profiles-rc.d/10-container.conf; [ -e "$f" ] && echo "profile $(cat "$f")"
for f in /mps/pipe/* /dev/shm/*; do [ -e "$f" ] && echo "mps $f"; done
true`

// containerView runs viewScript in the pod's container, its lines sorted.
func containerView(t *testing.T, n *Node, pod *corev1.Pod) []string {
	t.Helper()
	out, err := n.Exec(context.Background(), pod.Namespace, pod.Name, "main", "sh", "-c", viewScript)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	lines = slices.DeleteFunc(lines, func(l string) bool { return l == "" })
	slices.Sort(lines)
	t.Logf("pod %s sees:\n%s", pod.Name, strings.Join(lines, "\n"))
	return lines
}

// gpuView is what a container given GPU i of gpus sees: the device nodes
// of GPU i, nvidiactl and UVM (majors and minors as fakegpu made them),
// the driver's libraries the spec mounts, the libcuda.so link the spec's
// create-symlinks hook makes, the cache update-ldcache's run of the
// host's ldconfig writes (/usr/lib64 is among the system directories it
// assumes for a non-Debian image, so it adds no ld.so.conf.d entry), the application
// profile naming GPU i alone, and env.
func gpuView(gpus *FakeGPUs, i int, env ...string) []string {
	dev := func(name string, major, minor int) string {
		return fmt.Sprintf("dev /dev/%s %x:%x", name, major, minor)
	}
	lines := []string{
		dev(fmt.Sprintf("nvidia%d", i), fakegpu.MajorGPU, i),
		dev("nvidiactl", fakegpu.MajorGPU, 255),
		dev("nvidia-uvm", fakegpu.MajorUVM, 0),
		dev("nvidia-uvm-tools", fakegpu.MajorUVM, 1),
		"link /usr/lib64/libcuda.so -> libcuda.so.1",
		"ld.so.cache",
		fmt.Sprintf(`profile {"profiles":[{"name":"_container_","settings":["EGLVisibleDGPUDevices",0x%x]}],"rules":[{"pattern":[],"profile":"_container_"}]}`, 1<<i),
	}
	for _, lib := range []string{"libcuda.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so"} {
		lines = append(lines, "file "+filepath.Join("/usr/lib64", filepath.Base(gpus.Lib(lib))))
	}
	for _, e := range env {
		lines = append(lines, "env "+e)
	}
	slices.Sort(lines)
	return lines
}

// noGPU runs a pod that asks no GPU and checks that it sees nothing of the
// driver: the view is empty.
func noGPU(t *testing.T, n *Node) {
	t.Helper()
	pod := BusyboxPod(gpuNamespace, "no-gpu", "sleep", "3600")
	runPod(t, n, pod)
	if got := containerView(t, n, pod); len(got) != 0 {
		t.Errorf("a pod asking no GPU sees %q", got)
	}
}

// waitAllocatable waits until the node offers count of resource.
func waitAllocatable(ctx context.Context, t *testing.T, n *Node, res corev1.ResourceName, count int64) {
	t.Helper()
	var last resource.Quantity
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		node, err := n.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			continue
		}
		if last = node.Status.Allocatable[res]; last.Value() == count {
			return
		}
	}
	t.Fatalf("node %s allocatable %s = %s after a minute, want %d", n.Name, res, last.String(), count)
}

// allocatedGPU is the index of the GPU whose shares the kubelet gave the
// pod's container, read from the kubelet's device-plugin checkpoint.
func allocatedGPU(t *testing.T, n *Node, gpus *FakeGPUs, pod *corev1.Pod) int {
	t.Helper()
	uuid := allocatedUUID(t, n, pod)
	if i := slices.Index(gpus.UUIDs, uuid); i >= 0 {
		return i
	}
	t.Fatalf("pod %s got GPU %s, none of the node's %v", pod.Name, uuid, gpus.UUIDs)
	return -1
}

// allocatedUUID is the UUID of the GPU whose shares the kubelet gave the
// pod's container, read from the kubelet's device-plugin checkpoint.
func allocatedUUID(t *testing.T, n *Node, pod *corev1.Pod) string {
	t.Helper()
	got, err := n.Client.CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(KubeletDir, "device-plugins", "kubelet_internal_checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	var cp struct {
		Data struct {
			PodDeviceEntries []struct {
				PodUID, ContainerName, ResourceName string
				DeviceIDs                           map[string][]string
			}
		}
	}
	if err := json.Unmarshal(b, &cp); err != nil {
		t.Fatalf("kubelet's device-plugin checkpoint: %v", err)
	}
	uuids := map[string]bool{}
	for _, e := range cp.Data.PodDeviceEntries {
		if e.PodUID != string(got.UID) || e.ResourceName != agent.ResourceShare {
			continue
		}
		for _, ids := range e.DeviceIDs {
			for _, id := range ids {
				uuid, _, err := agent.ParseDeviceID(id)
				if err != nil {
					t.Fatal(err)
				}
				uuids[uuid] = true
			}
		}
	}
	if len(uuids) != 1 {
		t.Fatalf("the kubelet gave pod %s devices of %d GPUs (%v), want 1", pod.Name, len(uuids), uuids)
	}
	for uuid := range uuids {
		return uuid
	}
	return ""
}

// waitSliceDevices waits until the DRA driver publishes count GPUs of the node.
func waitSliceDevices(ctx context.Context, t *testing.T, n *Node, count int) {
	t.Helper()
	var last int
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		slices, err := n.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		last = 0
		for _, s := range slices.Items {
			if s.Spec.Driver == dra.DriverName && ptr.Deref(s.Spec.NodeName, "") == n.Name {
				last += len(s.Spec.Devices)
			}
		}
		if last == count {
			return
		}
	}
	t.Fatalf("ResourceSlices of %s on %s hold %d devices after a minute, want %d", dra.DriverName, n.Name, last, count)
}

// claimedGPU is the index of the GPU the scheduler allocated to the pod's
// claim, and the memory (MiB) the claim consumed of it.
func claimedGPU(ctx context.Context, t *testing.T, n *Node, pod *corev1.Pod) (int, int64) {
	t.Helper()
	c := podClaim(ctx, t, n, pod)
	if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 {
		t.Fatalf("claim %s allocation: %+v", c.Name, c.Status.Allocation)
	}
	res := c.Status.Allocation.Devices.Results[0]
	i, err := strconv.Atoi(strings.TrimPrefix(res.Device, "gpu-"))
	if err != nil || dra.GPUDeviceName(i) != res.Device {
		t.Fatalf("claim %s got device %q, not a whole GPU's", c.Name, res.Device)
	}
	mem := res.ConsumedCapacity[allocator.DRACapacityMemory]
	return i, mem.Value() >> 20
}

// A GPU that falls off the bus while the device plugin serves it (the fake
// NVML's control file: its queries answer ERROR_GPU_IS_LOST and the health
// event set reports XID 79) is withdrawn from the kubelet: the node's
// allocatable shares drop to the other GPU's, and a pod asking a whole
// GPU's shares gets that other GPU.
func TestKubeletDevicePluginWithdrawsALostGPU(t *testing.T) {
	n, gpus, _ := twoH100s(t, devicePluginMode)
	ctx := context.Background()
	if err := fakegpu.WriteControl(gpus.Control, fakegpu.Control{Lost: []string{gpus.UUIDs[1]}}); err != nil {
		t.Fatal(err)
	}
	waitAllocatable(ctx, t, n, agent.ResourceShare, sharesPerGPU)
	pod := sharePod("dp-after-loss")
	runPod(t, n, pod)
	if i := allocatedGPU(t, n, gpus, pod); i != 0 {
		t.Errorf("pod got GPU %d after GPU 1 was lost, want GPU 0", i)
	}
}

// A GPU that reports a critical XID (the fake NVML's control file: XID 48,
// the GPU still answering) while the DRA driver publishes it is tainted in
// the driver's ResourceSlice (NoSchedule, the driver's unhealthy key), so
// the scheduler allocates it to no new claim; the other GPU is not. (A GPU
// lost from the bus is not published at all: its memory is unknown.)
func TestKubeletDRATaintsAFailedGPU(t *testing.T) {
	n, gpus, _ := twoH100s(t, draMode)
	ctx := context.Background()
	if err := fakegpu.WriteControl(gpus.Control, fakegpu.Control{Failed: []string{gpus.UUIDs[1]}}); err != nil {
		t.Fatal(err)
	}
	waitDevices(ctx, t, n, "a minute after GPU 1 failed", map[string][]string{
		dra.GPUDeviceName(0): nil,
		dra.GPUDeviceName(1): {dra.TaintUnhealthy + ":" + string(resourceapi.DeviceTaintEffectNoSchedule)},
	})
}

// A GPU instance deleted while the DRA driver publishes its GPU's MIG
// devices (the fake NVML's control file) leaves the driver's ResourceSlice
// at the next rediscovery, the other instance and the whole GPU staying.
// (One deleted under a claim stays, tainted, until its pod is evicted:
// TestKubeletDRAVanishedMIGInstanceEvictsItsPod.)
func TestKubeletDRAUnpublishesADeletedMIGInstance(t *testing.T) {
	n, gpus, _ := migNode(t, "--resync=2s")
	if err := fakegpu.WriteControl(gpus.Control, fakegpu.Control{GoneInstances: map[string][]uint32{gpus.UUIDs[0]: {1}}}); err != nil {
		t.Fatal(err)
	}
	want := migDevices()
	delete(want, dra.MIGDeviceName(0, migProfile, 1))
	waitDevices(context.Background(), t, n, "after GPU instance 1 was deleted", want)
}

// waitDevices waits a minute for the driver's devices and their taints
// to be want.
func waitDevices(ctx context.Context, t *testing.T, n *Node, when string, want map[string][]string) {
	t.Helper()
	var got map[string][]string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if got = deviceTaints(ctx, t, n); cmp.Equal(want, got) {
			return
		}
	}
	t.Fatalf("devices and their taints %s (-want +got):\n%s", when, cmp.Diff(want, got))
}

// In MPS mode (deploy/overlays/agent-mps) a pod asking one share is an
// MPS client of the node's control daemon: besides its GPU as in
// TestKubeletDevicePluginGivesItsGPU, the daemon's pipe directory at
// /mps/pipe and its shared memory at /dev/shm, and CUDA_MPS_PIPE_DIRECTORY
// pointing there. NVIDIA's daemon cannot run without a GPU, so its
// DaemonSet is left out and the test stands in for it on the host: its
// directories under /run/gpuadmit/mps, each with a file the container must
// see, and the limits its control mode records (one share per GPU), without
// which the agent serves no MPS device. That the daemon holds the limit is
// proven on hardware only (docs/hardware.md).
func TestKubeletDevicePluginMPSClientGetsTheDaemon(t *testing.T) {
	n := requireNode(t)
	ctx := context.Background()
	gpus := newFakeGPUs(t, n, h100GPU, h100GPU)
	unit := h100MiB(t) / sharesPerGPU
	standInMPSDaemon(t, gpus, unit)
	labels := maps.Clone(devicePluginMode.labels)
	labels["gpuadmit.io/mps"] = "true"
	deployAgent(t, n, "deploy/overlays/agent-mps", devicePluginMode.name, labels, gpus)
	devicePluginMode.ready(ctx, t, n, gpus)

	pod := BusyboxPod(gpuNamespace, "mps-client", "sleep", "3600")
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{agent.ResourceShare: *resource.NewQuantity(1, resource.DecimalSI)}
	runPod(t, n, pod)
	got := containerView(t, n, pod)
	i := allocatedGPU(t, n, gpus, pod)
	want := gpuView(gpus, i, "NVIDIA_VISIBLE_DEVICES=void", "NVIDIA_CTK_LIBCUDA_DIR=/usr/lib64",
		fmt.Sprintf("GPUADMIT_MEMORY_LIMIT_MIB=%d", unit), "CUDA_MPS_PIPE_DIRECTORY="+agent.MPSContainerPipeDir)
	want = append(want, "mps "+agent.MPSContainerPipeDir+"/control", "mps "+agent.MPSContainerShmDir+"/e2e-shm")
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MPS client given GPU %d sees (-want +got):\n%s", i, diff)
	}
}

// standInMPSDaemon makes on the host what deploy/agent/mps's control daemon
// would have: its pipe and shared-memory directories under the agent's
// default MPS root, with a file in each (named as the daemon's control socket, and
// e2e-shm), and the limits file its control mode writes, unit MiB for each
// GPU. It refuses a machine where that root exists, and removes it when
// the test ends.
func standInMPSDaemon(t *testing.T, gpus *FakeGPUs, unit int64) {
	t.Helper()
	root := agent.DefaultMPSRoot
	if _, err := os.Stat(root); err == nil {
		t.Fatalf("%s exists: another MPS control daemon on this machine?", root)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	limits := agent.MPSLimits{}
	for _, uuid := range gpus.UUIDs {
		limits[uuid] = unit
	}
	b, err := json.Marshal(limits)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		filepath.Join(agent.MPSPipeDir(root), "control"): nil,
		filepath.Join(agent.MPSShmDir(root), "e2e-shm"):  nil,
		filepath.Join(root, "log", "control.log"):        nil,
		filepath.Join(root, agent.MPSLimitsFile):         b,
	}
	for p, content := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// deviceTaints are the taints (key:effect) of each device the DRA driver
// publishes for the node.
func deviceTaints(ctx context.Context, t *testing.T, n *Node) map[string][]string {
	t.Helper()
	list, err := n.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, s := range list.Items {
		if s.Spec.Driver != dra.DriverName || ptr.Deref(s.Spec.NodeName, "") != n.Name {
			continue
		}
		for _, d := range s.Spec.Devices {
			var taints []string
			for _, tn := range d.Taints {
				taints = append(taints, tn.Key+":"+string(tn.Effect))
			}
			out[d.Name] = taints
		}
	}
	return out
}

// Restarting the device-plugin agent (its pod deleted, the DaemonSet
// starting another) leaves a GPU pod running: the same container, never
// restarted, still seeing its GPU; and the new agent serves the kubelet
// again, so a new pod gets the other GPU.
func TestKubeletDevicePluginAgentRestartKeepsGPUPods(t *testing.T) {
	n, gpus, a := twoH100s(t, devicePluginMode)
	first := sharePod("dp-before-restart")
	runPod(t, n, first)
	i := allocatedGPU(t, n, gpus, first)
	keepsRunning(t, n, a, first, func() {
		second := sharePod("dp-after-restart")
		runPod(t, n, second)
		if j := allocatedGPU(t, n, gpus, second); j == i {
			t.Errorf("the pod started after the agent's restart got GPU %d, the running pod's", j)
		}
	})
}

// Restarting the DRA driver leaves a GPU pod running, the same container
// seeing the same GPU, and the new driver prepares a new pod's claim on
// the other GPU.
func TestKubeletDRAAgentRestartKeepsGPUPods(t *testing.T) {
	n, _, a := twoH100s(t, draMode)
	ctx := context.Background()
	tmpl := shareTemplate(t, n, h100MiB(t)/2+1) // two cannot share a GPU
	first := claimPod("dra-before-restart", tmpl)
	runPod(t, n, first)
	i, _ := claimedGPU(ctx, t, n, first)
	keepsRunning(t, n, a, first, func() {
		second := claimPod("dra-after-restart", tmpl)
		runPod(t, n, second)
		if j, _ := claimedGPU(ctx, t, n, second); j == i {
			t.Errorf("the pod started after the driver's restart got GPU %d, the running pod's", j)
		}
	})
}

// keepsRunning restarts the agent (its pod deleted, the DaemonSet starting
// another) while pod runs, checks that pod runs on in the same container,
// never restarted, seeing what it saw, then runs then.
func keepsRunning(t *testing.T, n *Node, a *Agent, pod *corev1.Pod, then func()) {
	t.Helper()
	ctx := context.Background()
	before, err := n.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	view := containerView(t, n, pod)
	old, err := n.AgentPod(ctx, a, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Client.CoreV1().Pods(old.Namespace).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// AgentPod passes over the deleted pod while it terminates.
	restarted, err := n.AgentPod(ctx, a, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if restarted.UID == old.UID {
		t.Fatalf("agent pod %s was not replaced", old.Name)
	}
	after, err := n.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, c := before.Status.ContainerStatuses[0], after.Status.ContainerStatuses[0]
	if !Running(after) || c.ContainerID != b.ContainerID || c.RestartCount != 0 {
		t.Errorf("GPU pod after the agent's restart: %s, container %s, %d restarts; before: container %s", podState(after), c.ContainerID, c.RestartCount, b.ContainerID)
	}
	if diff := cmp.Diff(view, containerView(t, n, pod)); diff != "" {
		t.Errorf("GPU pod's view after the agent's restart (-before +after):\n%s", diff)
	}
	then()
}
