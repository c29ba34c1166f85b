package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpuadmit/gpuadmit/pkg/agent"
)

// envOnlyPlugin stands in for the device-plugin agent before 14f3754: it
// serves gpuadmit's share resource with the agent's device IDs and answers
// Allocate as that agent did, with variables alone (NVIDIA_VISIBLE_DEVICES
// the GPU's UUID, and the memory limit): no device node, no CDI device. It
// runs in the test's process on the host, as a device plugin may.
type envOnlyPlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	devices []*pluginapi.Device
	unitMiB int64
	stop    chan struct{}
}

// envOnlySocket is the stand-in's socket in the kubelet's device-plugin
// directory (the agent's is another).
const envOnlySocket = "gpuadmit-env-only-e2e.sock"

// startEnvOnlyPlugin serves the shares of the GPU uuid, sharesPerGPU of
// unitMiB each, and registers with the kubelet. The returned stop ends it
// (its ListAndWatch stream too, as a stopped agent's ends) and removes its
// socket; the test's end calls it too.
func startEnvOnlyPlugin(t *testing.T, uuid string, unitMiB int64) (stop func()) {
	t.Helper()
	p := &envOnlyPlugin{unitMiB: unitMiB, stop: make(chan struct{})}
	for i := range sharesPerGPU {
		p.devices = append(p.devices, &pluginapi.Device{ID: agent.DeviceID(uuid, i), Health: pluginapi.Healthy})
	}
	dir := filepath.Join(KubeletDir, "device-plugins")
	path := filepath.Join(dir, envOnlySocket)
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go func() { _ = srv.Serve(l) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			close(p.stop)
			srv.Stop()
			_ = os.Remove(path)
		}
	}
	t.Cleanup(stop)
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, "kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: envOnlySocket, ResourceName: string(agent.ResourceShare),
		Options: &pluginapi.DevicePluginOptions{},
	}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("register the env-only stand-in with the kubelet: %v", err)
	}
	return stop
}

func (p *envOnlyPlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch sends the devices once and holds the stream until stop.
func (p *envOnlyPlugin) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices}); err != nil {
		return err
	}
	select {
	case <-p.stop:
	case <-s.Context().Done():
	}
	return nil
}

// Allocate answers as the agent before 14f3754 did (allocationOf's
// response): the GPU by NVIDIA_VISIBLE_DEVICES and the memory limit.
func (p *envOnlyPlugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	out := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		if len(c.DevicesIds) == 0 {
			return nil, errors.New("no devices")
		}
		uuid, _, err := agent.ParseDeviceID(c.DevicesIds[0])
		if err != nil {
			return nil, err
		}
		out.ContainerResponses = append(out.ContainerResponses, &pluginapi.ContainerAllocateResponse{Envs: map[string]string{
			"NVIDIA_VISIBLE_DEVICES": uuid,
			agent.EnvMemoryLimitMiB:  strconv.FormatInt(int64(len(c.DevicesIds))*p.unitMiB, 10),
		}})
	}
	return out, nil
}

// restartablePod is sharePod whose container runs until /tmp/restart
// exists in it, and which the kubelet restarts (restartPolicy Always).
func restartablePod(name string) *corev1.Pod {
	pod := sharePod(name)
	pod.Spec.Containers[0].Command = []string{"sh", "-c", "while [ ! -e /tmp/restart ]; do sleep 1; done"}
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	return pod
}

// restartContainer makes the pod's container exit and waits until the
// kubelet has started it again, a new container.
func restartContainer(t *testing.T, n *Node, pod *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	before, err := n.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old := before.Status.ContainerStatuses[0].ContainerID
	if _, err := n.Exec(ctx, pod.Namespace, pod.Name, "main", "touch", "/tmp/restart"); err != nil {
		t.Fatal(err)
	}
	if _, err := n.WaitPod(ctx, pod.Namespace, pod.Name, 2*time.Minute, func(p *corev1.Pod) bool {
		return Running(p) && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].ContainerID != old
	}); err != nil {
		t.Fatalf("pod %s's container after it exited: %v", pod.Name, err)
	}
}

// Upgrading the device-plugin agent from the env-only strategy (the agent
// before 14f3754 answered Allocate with NVIDIA_VISIBLE_DEVICES alone) to
// CDI devices, on the real kubelet: a pod admitted under the old answer
// (envOnlyPlugin stands in for that agent) keeps running when the new
// agent (deploy/agent) takes over the resource; when its container
// restarts, the kubelet starts it again with the old answer, from its own
// device-manager checkpoint (devicesToAllocate finds the container's
// devices, so no Allocate reaches the new agent): the variable and no
// device node, on runc no GPU at all; only the pod re-created (a new pod,
// a new UID) gets the new agent's CDI devices.
func TestKubeletDevicePluginUpgradeFromEnvOnly(t *testing.T) {
	n := requireNode(t)
	ctx := context.Background()
	gpus := newFakeGPUs(t, n, h100GPU, h100GPU)
	unit := h100MiB(t) / sharesPerGPU
	stopOld := startEnvOnlyPlugin(t, gpus.UUIDs[0], unit)
	waitAllocatable(ctx, t, n, agent.ResourceShare, sharesPerGPU)

	pod := restartablePod("dp-env-only")
	runPod(t, n, pod)
	envOnly := []string{fmt.Sprintf("env %s=%d", agent.EnvMemoryLimitMiB, unit*sharesPerGPU), "env NVIDIA_VISIBLE_DEVICES=" + gpus.UUIDs[0]}
	if diff := cmp.Diff(envOnly, containerView(t, n, pod)); diff != "" {
		t.Fatalf("pod %s under the env-only stand-in sees (-want +got):\n%s", pod.Name, diff)
	}
	before, err := n.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	stopOld()
	deployAgent(t, n, devicePluginMode.dir, devicePluginMode.name, devicePluginMode.labels, gpus)
	// The new agent serves both GPUs: the kubelet has its devices once it
	// registered.
	waitAllocatable(ctx, t, n, agent.ResourceShare, int64(len(gpus.UUIDs))*sharesPerGPU)
	after, err := n.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c, b := after.Status.ContainerStatuses[0], before.Status.ContainerStatuses[0]; !Running(after) || c.ContainerID != b.ContainerID {
		t.Errorf("pod %s after the new agent took over: %s, container %s; before: %s", pod.Name, podState(after), c.ContainerID, b.ContainerID)
	}
	if diff := cmp.Diff(envOnly, containerView(t, n, pod)); diff != "" {
		t.Errorf("pod %s's running container after the new agent took over sees (-want +got):\n%s", pod.Name, diff)
	}

	restartContainer(t, n, pod)
	if diff := cmp.Diff(envOnly, containerView(t, n, pod)); diff != "" {
		t.Errorf("pod %s's container restarted under the new agent sees (-want +got; want: the old answer, from the kubelet's checkpoint):\n%s", pod.Name, diff)
	}

	deletePod(t, n, pod)
	recreated := restartablePod(pod.Name)
	runPod(t, n, recreated)
	i := allocatedGPU(t, n, gpus, recreated)
	want := gpuView(gpus, i, "NVIDIA_VISIBLE_DEVICES=void", "NVIDIA_CTK_LIBCUDA_DIR=/usr/lib64",
		fmt.Sprintf("%s=%d", agent.EnvMemoryLimitMiB, unit*sharesPerGPU))
	if diff := cmp.Diff(want, containerView(t, n, recreated)); diff != "" {
		t.Errorf("pod %s re-created under the new agent, given GPU %d, sees (-want +got):\n%s", pod.Name, i, diff)
	}
}
