package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpuadmit/gpuadmit/pkg/agent"
	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// TestAgentPublishesOnARealNode runs the node agent against the API server:
// its GPU annotation and accounting capacity appear on a Node, and the
// webhook's inventory reads them (a pod on that pool gets accounting
// resources of the agent's reported size). NVML cannot run here (no GPU), so
// go-nvml's dgxa100 mock stands in for it; discovery itself is tested
// against the real readings in pkg/agent.
func TestAgentPublishesOnARealNode(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node := &corev1.Node{}
	node.Name = "agent-a100-0"
	node.Labels = map[string]string{inventory.LabelPool: "agent-a100", inventory.LabelProduct: "NVIDIA-A100-SXM4-40GB", inventory.LabelCount: "8"}
	node.Status.Allocatable = corev1.ResourceList{"cpu": resource.MustParse("64"), "memory": resource.MustParse("512Gi"), "pods": resource.MustParse("110"), "nvidia.com/gpu": resource.MustParse("8")}
	node.Status.Capacity = node.Status.Allocatable.DeepCopy()
	if err := env.AddNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	defer env.Client.Delete(context.Background(), node)

	server := dgxa100.New()
	for _, d := range server.Devices {
		d.(*dgxa100.Device).Config.Name = "NVIDIA A100-SXM4-40GB"
	}
	// The mock has no event sets; a driver without them answers so, and the
	// agent then watches health by probing.
	server.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
	// The agent runs as its ServiceAccount with deploy/agent's RBAC and
	// own-node policy, as the DaemonSet runs it.
	a := agent.New(server, agentClient(t, ctx, node.Name), agent.Options{NodeName: node.Name, PluginDir: t.TempDir(), Resync: time.Second, Retry: 200 * time.Millisecond})
	go a.Run(ctx)

	var gpus []agent.GPU
	waitFor(t, "agent publishes", 20*time.Second, func() (bool, string) {
		got := &corev1.Node{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(node), got); err != nil {
			return false, err.Error()
		}
		if err := json.Unmarshal([]byte(got.Annotations[agent.AnnotationGPUs]), &gpus); err != nil {
			return false, "no gpuadmit.io/gpus annotation yet"
		}
		c := got.Status.Allocatable[inventory.ResourceMemoryMiB]
		return len(gpus) == 8 && c.Value() == 8*gpus[0].MemoryMiB, "allocatable " + c.String()
	})
	checkShareOffer(t, ctx, node.Name, allocator.ShareOffer{Resource: agent.ResourceShare, UnitMiB: 40960 / 4, SharesPerGPU: 4})

	p := gpuPod("team-a", "on-agent-node", map[string]string{"nvidia.com/gpu": "1"})
	p.Annotations = map[string]string{"gpuadmit.io/model": "A100-40GB"}
	waitFor(t, "webhook inventory reads the agent's capacity", 20*time.Second, func() (bool, string) {
		q := p.DeepCopy()
		if err := env.Client.Create(ctx, q, client.DryRunAll); err != nil {
			return false, err.Error()
		}
		got := q.Spec.Containers[0].Resources.Limits[corev1.ResourceName(inventory.ModelResource("A100-40GB"))]
		return got.Value() == gpus[0].MemoryMiB, "a100-40gb-mib " + got.String()
	})
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	defer deleteAll(ctx, "team-a", p)
	if n := scheduledNode(t, ctx, p); n != node.Name {
		t.Errorf("scheduled on %s, want the agent's node %s", n, node.Name)
	}
}

// checkShareOffer reads the share the agent published on its Node.
func checkShareOffer(t *testing.T, ctx context.Context, node string, want allocator.ShareOffer) {
	t.Helper()
	got := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: node}, got); err != nil {
		t.Fatal(err)
	}
	var offer allocator.ShareOffer
	if err := json.Unmarshal([]byte(got.Annotations[agent.AnnotationShare]), &offer); err != nil || offer != want {
		t.Errorf("share annotation %q (%v), want %+v", got.Annotations[agent.AnnotationShare], err, want)
	}
}
