package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// TestDRAPoolServesNvidiaGPUThroughTheDeviceClass: the webhook's inventory
// reads the DRA agent's ResourceSlices, so a node with no nvidia.com/gpu in
// its allocatable is a whole-GPU pool; the webhook pins a plain
// nvidia.com/gpu pod to it, and the real scheduler allocates the GPU from
// the gpu.gpuadmit.io DeviceClass, whose extendedResourceName is
// nvidia.com/gpu. The scheduler counts that allocation: a second pod asking
// for both GPUs of the node stays unschedulable.
func TestDRAPoolServesNvidiaGPUThroughTheDeviceClass(t *testing.T) {
	ctx := context.Background()
	draNamespace(t, ctx, "dra-webhook") // installs deploy/dra's DeviceClasses
	draNode(t, ctx, "dra-a100-0", "webhook", fakeGPUs(2), 2)
	node := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "dra-a100-0"}, node); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(node.DeepCopy())
	node.Labels[inventory.LabelPool] = "dra-a100"
	node.Labels[inventory.LabelProduct] = "NVIDIA-A100-SXM4-40GB"
	node.Labels[allocator.LabelNodeMode] = allocator.NodeModeDRA
	if err := env.Client.Patch(ctx, node, patch); err != nil {
		t.Fatal(err)
	}

	one := gpuPod("team-a", "dra-whole-1", map[string]string{"nvidia.com/gpu": "1"})
	one.Annotations = map[string]string{"gpuadmit.io/model": "A100-40GB"}
	waitFor(t, "the webhook places the pod on the DRA pool", 30*time.Second, func() (bool, string) {
		q := one.DeepCopy()
		if err := env.Client.Create(ctx, q, client.DryRunAll); err != nil {
			return false, err.Error()
		}
		return q.Spec.NodeSelector[inventory.LabelPool] == "dra-a100", "nodeSelector " + toString(q.Spec.NodeSelector)
	})
	if err := env.Client.Create(ctx, one); err != nil {
		t.Fatal(err)
	}
	two := gpuPod("team-a", "dra-whole-2", map[string]string{"nvidia.com/gpu": "2"})
	two.Annotations = map[string]string{"gpuadmit.io/model": "A100-40GB"}
	defer deleteAll(ctx, "team-a", one, two)
	if n := scheduledNode(t, ctx, one); n != "dra-a100-0" {
		t.Fatalf("scheduled on %q, want dra-a100-0", n)
	}
	if err := env.Client.Create(ctx, two); err != nil {
		t.Fatal(err)
	}
	waitState(t, ctx, two, "unschedulable")
}

func toString(m map[string]string) string {
	s := ""
	for k, v := range m {
		s += k + "=" + v + " "
	}
	return s
}
