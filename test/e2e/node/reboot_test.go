package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuadmit/gpuadmit/pkg/agent"
	"github.com/gpuadmit/gpuadmit/pkg/agent/cdi"
	"github.com/gpuadmit/gpuadmit/pkg/agent/dra"
)

// After a reboot (Node.Reboot: every container killed, /var/run/cdi and
// /run/containerd wiped, the checkpoints kept) the kubelet restarts both
// DRA GPU pods in new containers, and each sees exactly the GPU its claim
// was given, as before: the kubelet prepares their claims again, and the
// driver, finding them in its checkpoint, writes their CDI specs again
// (each spec file is back, written after the reboot). A driver that
// answered from its checkpoint alone would hand the runtime CDI IDs with
// no spec behind them, and the containers would never be created.
func TestKubeletDRARebootRestartsGPUPods(t *testing.T) {
	n, gpus, _ := twoH100s(t, draMode)
	ctx := context.Background()
	tmpl := shareTemplate(t, n, h100MiB(t)/2+1) // two cannot share a GPU
	pods := restartAlways(claimPod("dra-reboot-a", tmpl), claimPod("dra-reboot-b", tmpl))
	specs := map[string]string{}
	for _, pod := range pods {
		runPod(t, n, pod)
		i, consumed := claimedGPU(ctx, t, n, pod)
		want := gpuView(gpus, i, "NVIDIA_VISIBLE_DEVICES=void", "NVIDIA_CTK_LIBCUDA_DIR=/usr/lib64",
			fmt.Sprintf("GPUADMIT_MEMORY_LIMIT_MIB=%d", consumed))
		if diff := cmp.Diff(want, containerView(t, n, pod)); diff != "" {
			t.Fatalf("before the reboot, pod %s, given GPU %d, sees (-want +got):\n%s", pod.Name, i, diff)
		}
		specs[pod.Name] = claimSpecFile(podClaim(ctx, t, n, pod).UID)
	}
	rebootRestarts(t, n, pods, func(pod *corev1.Pod) string { return specs[pod.Name] })
	for _, pod := range pods {
		if i, _ := claimedGPU(ctx, t, n, pod); specs[pod.Name] != claimSpecFile(podClaim(ctx, t, n, pod).UID) {
			t.Errorf("pod %s (GPU %d) holds another claim after the reboot", pod.Name, i)
		}
	}
}

// After a reboot the kubelet does not restart a device-plugin GPU pod: it
// admits the node's pods again as it starts, before the agent (itself a
// pod) has registered its device plugin, and rejects each pod asking
// gpuadmit's resource with UnexpectedAdmissionError ("no healthy devices
// present"), for good: a Kubernetes limitation of device plugins, which
// the agent cannot change; a controller's pods are replaced. The
// replacement gets exactly its GPU once the agent is back, whose node CDI
// spec is written again after the reboot.
func TestKubeletDevicePluginRebootFailsGPUPodsAndServesTheirReplacements(t *testing.T) {
	n, gpus, _ := twoH100s(t, devicePluginMode)
	ctx := context.Background()
	pod := restartAlways(sharePod("dp-reboot"))[0]
	runPod(t, n, pod)
	rebooted := time.Now()
	if err := n.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := n.WaitPod(ctx, pod.Namespace, pod.Name, time.Minute, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if err != nil {
		t.Fatalf("after the reboot: %v", err)
	}
	if got.Status.Reason != "UnexpectedAdmissionError" {
		t.Errorf("pod %s failed after the reboot with reason %q (%s), want the kubelet's UnexpectedAdmissionError", pod.Name, got.Status.Reason, got.Status.Message)
	}
	replacement := replace(t, n, "dp-reboot-replacement")
	i := allocatedGPU(t, n, gpus, replacement)
	want := gpuView(gpus, i, "NVIDIA_VISIBLE_DEVICES=void", "NVIDIA_CTK_LIBCUDA_DIR=/usr/lib64",
		fmt.Sprintf("GPUADMIT_MEMORY_LIMIT_MIB=%d", h100MiB(t)/sharesPerGPU*sharesPerGPU))
	if diff := cmp.Diff(want, containerView(t, n, replacement)); diff != "" {
		t.Errorf("the replacement, given GPU %d, sees (-want +got):\n%s", i, diff)
	}
	fi, err := os.Stat(agent.SpecFile(RunCDIDir))
	switch {
	case err != nil:
		t.Errorf("the node's CDI spec after the reboot: %v", err)
	case fi.ModTime().Before(rebooted):
		t.Errorf("the node's CDI spec was written at %s, before the reboot at %s: the wipe missed it", fi.ModTime(), rebooted)
	}
}

// replace runs a pod asking a whole GPU's shares as a ReplicaSet would
// replace a failed one: created again while the kubelet rejects it because
// the agent has not registered its device plugin yet after the reboot.
func replace(t *testing.T, n *Node, name string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	var last error
	for try := 0; try < 10; try++ {
		pod := restartAlways(sharePod(fmt.Sprintf("%s-%d", name, try)))[0]
		if _, err := n.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = n.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		})
		got, err := n.WaitPod(ctx, pod.Namespace, pod.Name, 2*time.Minute, Running)
		if err == nil {
			return pod
		}
		if last = err; got == nil || got.Status.Reason != "UnexpectedAdmissionError" {
			break
		}
		time.Sleep(2 * time.Second)
	}
	t.Fatalf("no replacement of a GPU pod runs after the reboot: %v", last)
	return nil
}

// rebootRestarts reboots the node with pods running and checks that each
// runs again in a new container seeing what it saw before, and that the
// CDI spec file spec names for it exists again, written after the reboot.
func rebootRestarts(t *testing.T, n *Node, pods []*corev1.Pod, spec func(*corev1.Pod) string) {
	t.Helper()
	ctx := context.Background()
	views, containers := map[string][]string{}, map[string]string{}
	for _, pod := range pods {
		views[pod.Name] = containerView(t, n, pod)
		got, err := n.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		containers[pod.Name] = got.Status.ContainerStatuses[0].ContainerID
		if _, err := os.Stat(spec(pod)); err != nil {
			t.Fatalf("before the reboot, pod %s's CDI spec: %v", pod.Name, err)
		}
	}
	rebooted := time.Now()
	if err := n.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("node rebooted and Ready in %s", time.Since(rebooted).Round(time.Second))
	for _, pod := range pods {
		_, err := n.WaitPod(ctx, pod.Namespace, pod.Name, 3*time.Minute, func(p *corev1.Pod) bool {
			return Running(p) && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].ContainerID != containers[pod.Name]
		})
		if err != nil {
			t.Fatalf("after the reboot (%s ago): %v", time.Since(rebooted).Round(time.Second), err)
		}
		if diff := cmp.Diff(views[pod.Name], containerView(t, n, pod)); diff != "" {
			t.Errorf("pod %s's view after the reboot (-before +after):\n%s", pod.Name, diff)
		}
		fi, err := os.Stat(spec(pod))
		switch {
		case err != nil:
			t.Errorf("after the reboot, pod %s's CDI spec: %v", pod.Name, err)
		case fi.ModTime().Before(rebooted):
			t.Errorf("pod %s's CDI spec %s was written at %s, before the reboot at %s: the wipe missed it", pod.Name, spec(pod), fi.ModTime(), rebooted)
		}
	}
	t.Logf("GPU pods running again %s after the reboot began", time.Since(rebooted).Round(time.Second))
}

// restartAlways sets the pods' restartPolicy to Always, as a Deployment's
// or a DaemonSet's pods have it: those the kubelet restarts after a reboot
// (BusyboxPod's Never ends Failed when its container dies).
func restartAlways(pods ...*corev1.Pod) []*corev1.Pod {
	for _, p := range pods {
		p.Spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	return pods
}

// claimSpecFile is the DRA driver's CDI spec file of a claim in /var/run/cdi.
func claimSpecFile(uid types.UID) string {
	return filepath.Join(RunCDIDir, strings.ReplaceAll(cdi.Kind, "/", "-")+"_"+string(uid)+".json")
}

// podClaim is the pod's one ResourceClaim.
func podClaim(ctx context.Context, t *testing.T, n *Node, pod *corev1.Pod) *resourceapi.ResourceClaim {
	t.Helper()
	got, err := n.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.ResourceClaimStatuses) != 1 || got.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
		t.Fatalf("pod %s's claim statuses: %+v", pod.Name, got.Status.ResourceClaimStatuses)
	}
	c, err := n.Client.ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, *got.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A claim deleted while the DRA driver is down (the kubelet cannot
// unprepare it: it stays in the driver's checkpoint) is released when the
// driver starts, by reconciling its checkpoint against the API, before it
// registers with the kubelet: the entry is gone from the checkpoint, the
// new agent's log names the claim (the kubelet retries its Unprepare and
// would free the claim too once the driver is registered: on this node
// the log is what tells the agent's release from the kubelet's), and a
// claim of more than half the GPU's memory, which with the stale entry's
// half would be an over-commit the driver refuses, runs on the one GPU.
func TestKubeletDRAReleasesClaimsDeletedWhileDown(t *testing.T) {
	n := requireNode(t)
	ctx := context.Background()
	gpus := newFakeGPUs(t, n, h100GPU)
	a := deployAgent(t, n, draMode.dir, draMode.name, draMode.labels, gpus)
	draMode.ready(ctx, t, n, gpus)
	total := h100MiB(t)

	pod := claimPod("dra-deleted-while-down", shareTemplate(t, n, total/2))
	if _, err := n.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // where the test failed before it deleted the pod
		_ = n.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	if _, err := n.WaitPod(ctx, pod.Namespace, pod.Name, 2*time.Minute, Running); err != nil {
		t.Fatal(err)
	}
	c := podClaim(ctx, t, n, pod)
	if !checkpointHolds(t, c.UID) {
		t.Fatalf("the driver's checkpoint does not hold claim %s of running pod %s", c.UID, pod.Name)
	}

	// The agent stops: the node loses the label its DaemonSet selects.
	off := map[string]string{}
	for k := range draMode.labels {
		off[k] = ""
	}
	if err := n.label(ctx, off); err != nil {
		t.Fatal(err)
	}
	waitNoAgentPod(ctx, t, n, a)
	deletePod(t, n, pod)
	if err := n.Client.ResourceV1().ResourceClaims(c.Namespace).Delete(ctx, c.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	waitClaimGone(ctx, t, n, c)
	if !checkpointHolds(t, c.UID) {
		t.Fatalf("claim %s left the driver's checkpoint while the driver was down", c.UID)
	}

	if err := n.label(ctx, draMode.labels); err != nil {
		t.Fatal(err)
	}
	started, err := n.AgentPod(ctx, a, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// The agent releases before it registers with the kubelet; its pod may
	// be reported ready a moment before the checkpoint is written.
	released := false
	for deadline := time.Now().Add(30 * time.Second); !released && time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		released = !checkpointHolds(t, c.UID)
	}
	if !released {
		t.Errorf("the restarted driver's checkpoint still holds claim %s, deleted while it was down", c.UID)
	}
	if log, err := n.Logs(ctx, started.Namespace, started.Name, "agent"); err != nil {
		t.Error(err)
	} else if !strings.Contains(log, "Released claims deleted from the API") || !strings.Contains(log, string(c.UID)) {
		t.Errorf("the restarted agent's log does not say it released claim %s:\n%s", c.UID, lastLines(log, 30))
	}

	// More than the stale entry's half leaves: the driver would refuse it
	// as an over-commit of the one GPU.
	next := claimPod("dra-after-release", shareTemplate(t, n, total/2+1))
	runPod(t, n, next)
	if i, _ := claimedGPU(ctx, t, n, next); i != 0 {
		t.Errorf("the claim after the release got GPU %d; the node has GPU 0 alone", i)
	}
}

// checkpointHolds says whether the DRA driver's checkpoint (in its plugin
// directory under /var/lib/kubelet) holds the claim.
func checkpointHolds(t *testing.T, uid types.UID) bool {
	t.Helper()
	path := filepath.Join(dra.DefaultPluginDataDir, "checkpoint.json")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	var cp struct {
		Claims map[types.UID]json.RawMessage `json:"claims"`
	}
	if err := json.Unmarshal(b, &cp); err != nil {
		t.Fatalf("the driver's checkpoint %s: %v", path, err)
	}
	_, ok := cp.Claims[uid]
	return ok
}

// waitNoAgentPod waits until the agent's DaemonSet has no pod left.
func waitNoAgentPod(ctx context.Context, t *testing.T, n *Node, a *Agent) {
	t.Helper()
	sel := metav1.FormatLabelSelector(a.DaemonSet.Spec.Selector)
	var left []string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		pods, err := n.Client.CoreV1().Pods(a.DaemonSet.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			continue
		}
		left = left[:0]
		for _, p := range pods.Items {
			left = append(left, p.Name)
		}
		if len(left) == 0 {
			return
		}
	}
	t.Fatalf("agent pods %v still there a minute after the node lost the DaemonSet's label", slices.Clip(left))
}

// waitClaimGone waits until the claim is deleted from the API.
func waitClaimGone(ctx context.Context, t *testing.T, n *Node, c *resourceapi.ResourceClaim) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		got, err := n.Client.ResourceV1().ResourceClaims(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return
		case err != nil:
			last = err.Error()
		default:
			last = fmt.Sprintf("finalizers %v, reserved for %v", got.Finalizers, got.Status.ReservedFor)
		}
	}
	t.Fatalf("claim %s/%s still there a minute after its deletion: %s", c.Namespace, c.Name, last)
}
