package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"golang.org/x/sys/unix"

	"github.com/gpuadmit/gpuadmit/internal/ociimage"
	"github.com/gpuadmit/gpuadmit/pkg/agent"
	"github.com/gpuadmit/gpuadmit/pkg/agent/dra"
)

// The Kubelet suite on a machine with a real NVIDIA GPU: the same real
// kubelet, containerd and runc, and the agent as its DaemonSet, but the
// shipped agent (NVML from the driver's libnvidia-ml, no fake), the CDI
// specs it generates from the machine's own driver root applied by
// containerd and runc, and a CUDA program (hack/gpu/cudaprobe.c) in the
// container that initialises the driver and allocates GPU memory. These
// tests run only where GPUADMIT_HW_DRIVER_ROOT names the driver root
// (hack/gpu/node-check.sh sets it on a lent GPU machine, with the bundle
// hack/gpu/node-bundle.sh builds); everywhere else, CI included, they skip.

// cudaProbeImage holds busybox (as BusyboxImage) and /cudaprobe with the C
// library it links, taken from this machine: the driver's libraries come
// from the CDI spec alone.
const cudaProbeImage = "gpuadmit.local/cudaprobe:e2e"

// HostDriver is this machine's own NVIDIA driver root, read by the shipped
// agent (NVML from the driver's libnvidia-ml.so.1 under it).
type HostDriver struct {
	// Dir is the driver root: / or where the driver is mounted
	// (/usr/local/nvidia, /run/nvidia/driver).
	Dir string
	// HookPath is nvidia-cdi-hook on the host, which the specs name.
	HookPath string
}

func (h HostDriver) overlay() (string, map[string]string) {
	return h.Dir, map[string]string{
		"--driver-root":           h.Dir,
		"--container-driver-root": agentDriverRoot,
		"--nvidia-cdi-hook-path":  h.HookPath,
	}
}

// hostGPU is one of this machine's GPUs as nvidia-smi reports it.
type hostGPU struct {
	Name, UUID string
	MiB        int64
}

var hardware struct {
	once   sync.Once
	err    error
	driver HostDriver
	gpus   []hostGPU
}

// rehearsal says the hardware tests run on one fake H100 instead
// (GPUADMIT_HW_REHEARSAL set, no GPU): everything but the CUDA checks, to
// try a bundle and the harness here before a GPU machine's short lease.
func rehearsal() bool { return os.Getenv("GPUADMIT_HW_REHEARSAL") != "" }

// onHardware returns the node, this machine's driver root and its GPUs,
// after importing the agent's and the probe's images (once) and giving the
// driver root shared propagation until the test ends (shareDriverRoot: the
// agent's DaemonSets mount it with HostToContainer propagation, which
// containerd refuses from a private mount); it skips off a GPU machine.
func onHardware(t *testing.T) (*Node, DriverRoot, []hostGPU) {
	t.Helper()
	driverRoot := os.Getenv("GPUADMIT_HW_DRIVER_ROOT")
	if driverRoot == "" && !rehearsal() {
		t.Skip("SKIPPED, NOT TESTED: not a GPU machine (GPUADMIT_HW_DRIVER_ROOT unset); hack/gpu/node-check.sh runs these on one")
	}
	n := requireNode(t)
	hardware.once.Do(func() { hardware.err = prepareHardware(n, driverRoot) })
	if hardware.err != nil {
		t.Fatal(hardware.err)
	}
	if rehearsal() {
		gpus := newFakeGPUs(t, n, h100GPU)
		return n, gpus, []hostGPU{{Name: "NVIDIA H100 80GB HBM3", UUID: gpus.UUIDs[0], MiB: h100MiB(t)}}
	}
	if err := shareDriverRoot(t, driverRoot); err != nil {
		t.Fatal(err)
	}
	return n, hardware.driver, hardware.gpus
}

// shareDriverRoot gives dir shared mount propagation until the test ends,
// as a node's (systemd's) mounts have: where dir is a mount point (a
// driver mounted at /usr/local/nvidia) that mount is made shared and
// private again afterwards, since containerd judges a path by the first
// mount at its mount point and would not see a bind mount over it; else
// dir becomes a shared bind mount of itself.
func shareDriverRoot(t *testing.T, dir string) error {
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	if !slices.Contains(mounts, dir) {
		if err := sharedMount(dir); err != nil {
			return err
		}
		t.Cleanup(func() {
			if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
				t.Errorf("unmount the shared bind mount of %s: %v", dir, err)
			}
		})
		return nil
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		return fmt.Errorf("make %s shared: %w", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Mount("", dir, "", unix.MS_PRIVATE, ""); err != nil {
			t.Errorf("make %s private again: %v", dir, err)
		}
	})
	return nil
}

// prepareHardware imports the agent (built from the repository at root,
// or $GPUADMIT_AGENT_BIN) and the probe, and finds the GPUs under
// driverRoot.
func prepareHardware(n *Node, driverRoot string) error {
	agentImage.once.Do(func() { agentImage.err = n.BuildAgentImage(root) })
	if agentImage.err != nil {
		return agentImage.err
	}
	probe := os.Getenv("GPUADMIT_CUDAPROBE")
	if probe == "" {
		return fmt.Errorf("GPUADMIT_CUDAPROBE must name the built hack/gpu/cudaprobe.c")
	}
	im, err := busyboxImage(busyboxPath)
	if err != nil {
		return err
	}
	im.Name = cudaProbeImage
	im.Files["/cudaprobe"] = probe
	libs, err := ociimage.DriverSharedLibraries(probe)
	if err != nil {
		return fmt.Errorf("shared libraries of %s: %w", probe, err)
	}
	for inImage, here := range libs {
		im.Files[inImage] = here
	}
	if err := n.Import(im); err != nil {
		return err
	}
	if rehearsal() {
		return nil
	}
	hook := filepath.Join(n.Dir, "nvidia-cdi-hook")
	if b, err := os.ReadFile(filepath.Join(n.bin, "nvidia-cdi-hook")); err != nil {
		return err
	} else if err := os.WriteFile(hook, b, 0o755); err != nil {
		return err
	}
	hardware.driver = HostDriver{Dir: driverRoot, HookPath: hook}
	hardware.gpus, err = nvidiaSMI(driverRoot)
	return err
}

// nvidiaSMI lists the machine's GPUs with the driver's nvidia-smi.
func nvidiaSMI(root string) ([]hostGPU, error) {
	cmd := exec.Command(filepath.Join(root, "bin", "nvidia-smi"), "--query-gpu=name,uuid,memory.total", "--format=csv,noheader,nounits")
	if root == "/" {
		cmd = exec.Command("nvidia-smi", cmd.Args[1:]...)
	}
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+filepath.Join(root, "lib64")+":"+filepath.Join(root, "lib"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi: %w: %s", err, out)
	}
	var gpus []hostGPU
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, ",")
		if len(f) != 3 {
			return nil, fmt.Errorf("nvidia-smi line %q", line)
		}
		m, err := strconv.ParseInt(strings.TrimSpace(f[2]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("nvidia-smi line %q: %w", line, err)
		}
		gpus = append(gpus, hostGPU{Name: strings.TrimSpace(f[0]), UUID: strings.TrimSpace(f[1]), MiB: m})
	}
	if len(gpus) == 0 {
		return nil, fmt.Errorf("nvidia-smi lists no GPU: %s", out)
	}
	return gpus, nil
}

// probePod is a pod of the probe's image that sleeps, for the probe to be
// run in it.
func probePod(name string) *corev1.Pod {
	pod := BusyboxPod(gpuNamespace, name, "sleep", "3600")
	pod.Spec.Containers[0].Image = cudaProbeImage
	return pod
}

// probe runs the CUDA probe in the pod's container, allocating each of
// mib in turn, and returns its lines.
func probe(t *testing.T, n *Node, pod *corev1.Pod, mib ...int64) []string {
	t.Helper()
	args := []string{"/cudaprobe"}
	for _, m := range mib {
		args = append(args, strconv.FormatInt(m, 10))
	}
	out, err := n.Exec(context.Background(), pod.Namespace, pod.Name, "main", args...)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	t.Logf("CUDA in pod %s:\n%s", pod.Name, out)
	return lines
}

// gpuNodes are the GPU device nodes (/dev/nvidia<N>) a container's view
// holds.
func gpuNodes(view []string) []string {
	var nodes []string
	for _, l := range view {
		f := strings.Fields(l)
		if len(f) == 3 && f[0] == "dev" && strings.HasPrefix(f[1], "/dev/nvidia") {
			if _, err := strconv.Atoi(strings.TrimPrefix(f[1], "/dev/nvidia")); err == nil {
				nodes = append(nodes, f[1])
			}
		}
	}
	return nodes
}

// wantCUDA checks the probe's lines: the driver loads and initialises,
// exactly one GPU is visible and it is uuid, and each allocation has the
// result wanted.
func wantCUDA(t *testing.T, lines []string, uuid string, allocs map[int64]string) {
	t.Helper()
	if rehearsal() {
		t.Logf("rehearsal on a fake GPU: CUDA not checked")
		return
	}
	want := []string{"dlopen libcuda.so.1 ok", "init CUDA_SUCCESS", "devices 1"}
	for _, w := range want {
		if !slices.Contains(lines, w) {
			t.Errorf("CUDA in the container: no line %q in %q", w, lines)
		}
	}
	var devices []string
	for _, l := range lines {
		if strings.HasPrefix(l, "device ") {
			devices = append(devices, l)
		}
	}
	if len(devices) != 1 || !strings.HasSuffix(devices[0], "|"+uuid) {
		t.Errorf("CUDA in the container sees devices %q, want exactly %s", devices, uuid)
	}
	for mib, res := range allocs {
		if w := fmt.Sprintf("alloc %d %s", mib, res); !slices.Contains(lines, w) {
			t.Errorf("CUDA in the container: allocating %d MiB, want %q in %q", mib, w, lines)
		}
	}
}

// In device-plugin mode on a real GPU, a pod asking a whole GPU's shares
// gets that GPU through the CDI device the agent's Allocate names: its
// process sees exactly that GPU's device node, CUDA initialises, sees one
// device whose UUID is the one the kubelet allocated, and allocates GPU
// memory; a pod asking none sees no GPU device node and cannot load the
// driver.
func TestKubeletHardwareDevicePluginGivesItsGPU(t *testing.T) {
	n, driver, gpus := onHardware(t)
	ctx := context.Background()
	deployAgent(t, n, devicePluginMode.dir, devicePluginMode.name, devicePluginMode.labels, driver)
	waitAllocatable(ctx, t, n, agent.ResourceShare, int64(len(gpus))*sharesPerGPU)

	t.Run("ThroughTheWebhook", func(t *testing.T) { throughTheWebhook(t, n, gpus) })

	pod := probePod("hw-dp-gpu")
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{agent.ResourceShare: *resource.NewQuantity(sharesPerGPU, resource.DecimalSI)}
	runPod(t, n, pod)
	uuid := allocatedUUID(t, n, pod)
	view := containerView(t, n, pod)
	if nodes := gpuNodes(view); len(nodes) != 1 {
		t.Errorf("pod given GPU %s sees GPU device nodes %q, want exactly one", uuid, nodes)
	}
	wantCUDA(t, probe(t, n, pod, 1024), uuid, map[int64]string{1024: "CUDA_SUCCESS"})

	none := probePod("hw-no-gpu")
	runPod(t, n, none)
	if nodes := gpuNodes(containerView(t, n, none)); len(nodes) != 0 {
		t.Errorf("a pod asking no GPU sees GPU device nodes %q", nodes)
	}
	if lines := probe(t, n, none); len(lines) != 1 || !strings.HasPrefix(lines[0], "dlopen libcuda.so.1 error") {
		t.Errorf("a pod asking no GPU: CUDA says %q, want that libcuda.so.1 cannot be loaded", lines)
	}
}

// In DRA mode on a real GPU, a pod whose claim asks half a GPU's memory
// gets the GPU the scheduler allocated through the claim's CDI spec: CUDA
// sees exactly that GPU (its UUID as the ResourceSlice publishes it) and
// allocates memory.
func TestKubeletHardwareDRAGivesItsGPU(t *testing.T) {
	n, driver, gpus := onHardware(t)
	ctx := context.Background()
	deployAgent(t, n, draMode.dir, draMode.name, draMode.labels, driver)
	waitSliceDevices(ctx, t, n, len(gpus))

	tmpl := shareTemplate(t, n, gpus[0].MiB/2)
	pod := probePod("hw-dra-gpu")
	claimed := claimPod("unused", tmpl)
	pod.Labels, pod.Spec.ResourceClaims, pod.Spec.Containers[0].Resources.Claims = claimed.Labels, claimed.Spec.ResourceClaims, claimed.Spec.Containers[0].Resources.Claims
	runPod(t, n, pod)
	i, consumed := claimedGPU(ctx, t, n, pod)
	uuid := sliceAttribute(ctx, t, n, dra.GPUDeviceName(i), dra.AttrUUID)
	view := containerView(t, n, pod)
	if nodes := gpuNodes(view); len(nodes) != 1 {
		t.Errorf("pod given GPU %s sees GPU device nodes %q, want exactly one", uuid, nodes)
	}
	if w := fmt.Sprintf("env %s=%d", agent.EnvMemoryLimitMiB, consumed); !slices.Contains(view, w) {
		t.Errorf("pod given %d MiB of GPU %s: no %q in its view", consumed, uuid, w)
	}
	wantCUDA(t, probe(t, n, pod, 1024), uuid, map[int64]string{1024: "CUDA_SUCCESS"})
}

// throughTheWebhook runs a pod the way a user writes it, in a namespace
// gpuadmit's webhook serves, asking 8 GiB of GPU memory in gpuadmit's own
// dialect: the webhook (in this control plane) rewrites it into the
// node's share resource, the scheduler places it, the kubelet has the
// agent allocate it, and its process gets the GPU and allocates memory on
// it. The pod is deleted at the end, freeing its shares.
func throughTheWebhook(t *testing.T, n *Node, gpus []hostGPU) {
	got := webhookPod(t, n, gpus[0].Name, cudaProbeImage)
	uuid := allocatedUUID(t, n, got)
	if nodes := gpuNodes(containerView(t, n, got)); len(nodes) != 1 {
		t.Errorf("pod given GPU %s sees GPU device nodes %q, want exactly one", uuid, nodes)
	}
	wantCUDA(t, probe(t, n, got, 1024), uuid, map[int64]string{1024: "CUDA_SUCCESS"})
	deletePod(t, n, got)
}

// webhookPod runs a pod of image asking gpuadmit.io/gpu-memory: 8Gi in a
// namespace the webhook serves, on a device-plugin node whose GPUs are
// named product, and returns it as the webhook wrote it, once it runs,
// after checking that the webhook rewrote it into shares of the agent's
// resource. The node carries the model label GPU Feature Discovery would
// give it (nvidia.com/gpu.product, the name with dashes), by which the
// webhook knows its pool, until the test ends.
func webhookPod(t *testing.T, n *Node, product, image string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	if err := n.label(ctx, map[string]string{"nvidia.com/gpu.product": strings.ReplaceAll(product, " ", "-")}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.label(ctx, map[string]string{"nvidia.com/gpu.product": ""}); err != nil {
			t.Error(err)
		}
	})
	const ns = "gpuadmit-webhook-pods"
	if _, err := n.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := n.WaitServiceAccount(ctx, ns); err != nil {
		t.Fatal(err)
	}
	pod := BusyboxPod(ns, "webhook-gpu", "sleep", "3600")
	pod.Spec.Containers[0].Image = image
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"gpuadmit.io/gpu-memory": resource.MustParse("8Gi")}
	// The webhook builds its inventory in the background, a debounce after
	// a node changes: until it has read the label just set it has no pool
	// for the pod and refuses it, as it would any pod created then. Wait
	// until a dry run of the pod is admitted.
	var dryErr error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, dryErr = n.Client.CoreV1().Pods(ns).Create(ctx, pod.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); dryErr == nil {
			break
		}
	}
	if dryErr != nil {
		t.Fatalf("the webhook does not admit the pod a minute after the node's product label: %v", dryErr)
	}
	runPod(t, n, pod)
	got, err := n.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the webhook wrote limits %v, nodeSelector %v, annotations %v", got.Spec.Containers[0].Resources.Limits, got.Spec.NodeSelector, got.Annotations)
	if q, ok := got.Spec.Containers[0].Resources.Limits[agent.ResourceShare]; !ok || q.Value() < 1 {
		t.Errorf("the webhook's rewrite asks %v, want shares of %s", got.Spec.Containers[0].Resources.Limits, agent.ResourceShare)
	}
	return got
}
