package agent

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

const nodeName = "gpu-node-1"

// harness is a GPU node without GPUs: fake GPUs answering as the H100
// reading, a fake kubelet, and a fake API client.
// The API client is controller-runtime's fake: the agent only patches its
// own Node, and the end-to-end tests against a real kube-apiserver will
// cover the agent's RBAC and patches there.
type harness struct {
	t       *testing.T
	dir     string
	gpus    []*device
	nvml    *fakeNVML
	kubelet *fakeKubelet
	nodes   client.Client
	clock   *clocktesting.FakeClock
}

func newHarness(t *testing.T, gpus int) *harness {
	h := &harness{t: t, dir: t.TempDir(), gpus: h100s(t, gpus)}
	h.nvml = newFakeNVML(nvmlDevices(h.gpus)...)
	h.kubelet = startKubelet(t, h.dir)
	h.nodes = fake.NewClientBuilder().WithObjects(gpuNode()).WithStatusSubresource(&corev1.Node{}).Build()
	h.clock = clocktesting.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	return h
}

// gpuNode is the Node before the agent: the kubelet's resources, and the
// accounting resource of a model whose GPUs were replaced since.
func gpuNode() *corev1.Node {
	list := corev1.ResourceList{
		corev1.ResourceCPU:                 resource.MustParse("32"),
		"nvidia.com/gpu":                   resource.MustParse("0"),
		"gpuadmit.io/a100-40gb-mib":        resource.MustParse("40960"),
		corev1.ResourceName(ResourceShare): resource.MustParse("158"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{"nvidia.com/gpu.present": "true"}},
		Status:     corev1.NodeStatus{Capacity: list, Allocatable: list.DeepCopy()},
	}
}

// options are the agent's options on the harness's node.
func (h *harness) options() Options {
	return Options{
		NodeName: nodeName, PluginDir: h.dir, SharesPerGPU: testShares, Clock: h.clock, Retry: time.Hour, RecoverAfter: 5 * time.Minute,
	}
}

// start runs an agent and returns the kubelet's device manager for it once
// it registered; the agent stops with the test, or when stop is called.
func (h *harness) start() (a *Agent, m *deviceManager, stop func()) {
	h.t.Helper()
	return h.startWith(h.options())
}

// startWith is start with the agent's options o.
func (h *harness) startWith(o Options) (a *Agent, m *deviceManager, stop func()) {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a = New(h.nvml, h.nodes, o)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	stop = func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				h.t.Errorf("agent stopped with %v", err)
			}
		case <-time.After(waitFor):
			h.t.Error("the agent did not stop")
		}
	}
	h.t.Cleanup(func() {
		if ctx.Err() == nil {
			stop()
		}
	})
	return a, h.kubelet.registered(ctx), stop
}

// node reads the Node back.
func (h *harness) node() *corev1.Node {
	h.t.Helper()
	n := &corev1.Node{}
	if err := h.nodes.Get(context.Background(), client.ObjectKey{Name: nodeName}, n); err != nil {
		h.t.Fatal(err)
	}
	return n
}

// eventually waits until cond holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func clientKey(name string) client.ObjectKey { return client.ObjectKey{Name: name} }
