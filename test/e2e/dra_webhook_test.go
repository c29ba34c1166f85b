package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpuadmit/gpuadmit/pkg/agent/dra"
	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/claim"
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
	draPoolNode(t, ctx, "dra-a100-0", "dra-a100", 2)

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

	// A newer DeviceClass of another driver naming nvidia.com/gpu takes the
	// name from gpuadmit's class cluster-wide (the scheduler's rule, read
	// from the same ExtendedResourceCache the scheduler uses): the webhook
	// stops placing nvidia.com/gpu pods on the DRA pool. Deleting that class
	// does not give the name back — upstream's cache drops the mapping and
	// restores no older class, in the scheduler too — until gpuadmit's
	// class is written again (kubectl apply -k deploy/dra does).
	time.Sleep(1100 * time.Millisecond) // creation timestamps have a resolution of one second
	other := &resourceapi.DeviceClass{}
	other.Name = "gpu.other.example.com"
	other.Spec.ExtendedResourceName = ptr.To("nvidia.com/gpu")
	if err := env.Client.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	defer env.Client.Delete(context.Background(), other)
	onPool := func() (bool, string) {
		q := gpuPod("team-a", "dra-whole-probe", map[string]string{"nvidia.com/gpu": "1"})
		q.Annotations = map[string]string{"gpuadmit.io/model": "A100-40GB"}
		err := env.Client.Create(ctx, q, client.DryRunAll)
		return err == nil && q.Spec.NodeSelector[inventory.LabelPool] == "dra-a100", errString(err)
	}
	waitFor(t, "the webhook leaves nvidia.com/gpu to the newer class", 30*time.Second, func() (bool, string) {
		ok, why := onPool()
		return !ok, why
	})
	if err := env.Client.Delete(ctx, other); err != nil {
		t.Fatal(err)
	}
	ours := &resourceapi.DeviceClass{}
	ours.Name = dra.ClassGPU
	touch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"e2e.gpuadmit.io/reapplied":"true"}}}`))
	if err := env.Client.Patch(ctx, ours, touch); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the DRA pool serves nvidia.com/gpu again", 30*time.Second, onPool)
}

func toString(m map[string]string) string {
	s := ""
	for k, v := range m {
		s += k + "=" + v + " "
	}
	return s
}

// draPoolNode runs the DRA agent for a kwok node of gpus A100 40GB GPUs and
// labels the node as an operator would: its own pool, its product, DRA mode.
func draPoolNode(t *testing.T, ctx context.Context, name, pool string, gpus int) {
	t.Helper()
	draNode(t, ctx, name, pool, fakeGPUs(gpus), gpus)
	node := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(node.DeepCopy())
	node.Labels[inventory.LabelPool] = pool
	node.Labels[inventory.LabelProduct] = "NVIDIA-A100-SXM4-40GB"
	node.Labels[allocator.LabelNodeMode] = allocator.NodeModeDRA
	if err := env.Client.Patch(ctx, node, patch); err != nil {
		t.Fatal(err)
	}
}

// TestDRAShareThroughTheWebhook: a memory request on a DRA pool becomes a
// claim from gpuadmit's template, which the reconciler creates; the real
// scheduler places each claim on one GPU with room, so a 20 GiB share is
// refused on a node whose 20 GiB free are 10 + 10 on two GPUs.
func TestDRAShareThroughTheWebhook(t *testing.T) {
	ctx := context.Background()
	draNamespace(t, ctx, "dra-share-webhook") // installs deploy/dra's DeviceClasses
	draPoolNode(t, ctx, "dra-share-0", "dra-share", 2)
	share := func(name, gib string) *corev1.Pod {
		p := gpuPod("team-a", name, map[string]string{"gpuadmit.io/gpu-memory": gib})
		p.Annotations = map[string]string{"gpuadmit.io/model": "A100-40GB", "gpuadmit.io/backend": "shared"}
		return p
	}
	first := share("dra-share-30a", "30Gi")
	waitFor(t, "the webhook writes a claim on the DRA pool", 30*time.Second, func() (bool, string) {
		q := first.DeepCopy()
		if err := env.Client.Create(ctx, q, client.DryRunAll); err != nil {
			return false, err.Error()
		}
		return len(q.Spec.ResourceClaims) == 1 && q.Spec.NodeSelector[inventory.LabelPool] == "dra-share",
			fmt.Sprintf("claims %v, nodeSelector %v", q.Spec.ResourceClaims, q.Spec.NodeSelector)
	})
	second, third := share("dra-share-30b", "30Gi"), share("dra-share-20", "20Gi")
	defer deleteAll(ctx, "team-a", first, second, third)
	for _, p := range []*corev1.Pod{first, second} {
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		waitState(t, ctx, p, "node dra-share-0")
	}
	if a, b := podAllocation(t, ctx, first), podAllocation(t, ctx, second); a.device == b.device {
		t.Errorf("two 30 GiB shares on one 40 GiB GPU (%s)", a.device)
	}
	if err := env.Client.Create(ctx, third); err != nil {
		t.Fatal(err)
	}
	waitState(t, ctx, third, "unschedulable") // 10 + 10 GiB free, on two GPUs
	tmpl := &resourceapi.ResourceClaimTemplate{}
	key := client.ObjectKey{Namespace: "team-a", Name: claim.TemplateName(30 * 1024)}
	if err := env.Client.Get(ctx, key, tmpl); err != nil {
		t.Errorf("the reconciler's template %s: %v", key.Name, err)
	}
}
