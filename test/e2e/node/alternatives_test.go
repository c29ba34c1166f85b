package node

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuadmit/gpuadmit/pkg/agent/dra"
	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/claim"
)

// A pod with DRA alternatives, as the webhook writes it (a claim from
// gpuadmit's alternatives template, whose one request lists a whole GPU
// first and a share second as firstAvailable subrequests, each selecting
// its devices by the model the agent publishes), runs on the real kubelet
// with the real agent and gets the first alternative that fits: with one
// of two H100s holding another pod's share, a whole GPU, the other one,
// which is all its container sees, its memory limit the GPU's. With both
// GPUs taken whole or in part, the next pod of the same template gets the
// second alternative, a share of the GPU that has room, and sees that GPU,
// its memory limit being the share the claim consumed.
func TestKubeletDRAAlternativesTakeTheFirstThatFits(t *testing.T) {
	n, gpus, _ := twoH100s(t, draMode)
	ctx := context.Background()
	quarter := h100MiB(t) / 4
	filler := claimPod("alt-filler", shareTemplate(t, n, quarter))
	runPod(t, n, filler)
	taken, _ := claimedGPU(ctx, t, n, filler)

	model := publishedModel(ctx, t, n)
	tmpl := createTemplate(t, n, claim.AlternativesTemplate(gpuNamespace, []claim.Alternative{
		{Backend: claim.BackendWhole, Model: model, Count: 1},
		{Backend: claim.BackendShared, Model: model, MiB: quarter},
	}))
	for _, step := range []struct {
		pod, sub string
		gpu      int
	}{
		{pod: "alt-first", sub: "whole0", gpu: 1 - taken}, // the only GPU no claim holds
		{pod: "alt-second", sub: "shared1", gpu: taken},   // no GPU is whole any more; the filler's has room
	} {
		pod := claimPod(step.pod, tmpl)
		pod.Labels = nil // not a share pod: its claim comes from an alternatives template
		runPod(t, n, pod)
		r := podClaim(ctx, t, n, pod).Status.Allocation
		if r == nil || len(r.Devices.Results) != 1 {
			t.Fatalf("pod %s's claim allocation: %+v", step.pod, r)
		}
		res := r.Devices.Results[0]
		if want := claim.Request + "/" + step.sub; res.Request != want || res.Device != dra.GPUDeviceName(step.gpu) {
			t.Errorf("pod %s was allocated %s of %s, want %s of %s (the filler holds %s)", step.pod, res.Device, res.Request,
				dra.GPUDeviceName(step.gpu), want, dra.GPUDeviceName(taken))
		}
		// A whole GPU's limit is the GPU's memory; a share's, what its claim consumed.
		limit := h100MiB(t)
		if step.sub == "shared1" {
			consumed := res.ConsumedCapacity[allocator.DRACapacityMemory]
			if limit = consumed.Value() >> 20; limit < quarter {
				t.Errorf("pod %s's share consumed %d MiB, less than the %d MiB it asked", step.pod, limit, quarter)
			}
		}
		want := gpuView(gpus, step.gpu, "NVIDIA_VISIBLE_DEVICES=void", "NVIDIA_CTK_LIBCUDA_DIR=/usr/lib64",
			fmt.Sprintf("GPUADMIT_MEMORY_LIMIT_MIB=%d", limit))
		if diff := cmp.Diff(want, containerView(t, n, pod)); diff != "" {
			t.Errorf("pod %s, allocated %s of GPU %d (%s), sees (-want +got):\n%s", step.pod, step.sub, step.gpu, gpus.UUIDs[step.gpu], diff)
		}
	}
}

// publishedModel is the model attribute the agent publishes for the node's
// GPUs, which an alternative selects its devices by.
func publishedModel(ctx context.Context, t *testing.T, n *Node) string {
	t.Helper()
	return sliceAttribute(ctx, t, n, "", resourceapi.QualifiedName(allocator.DRAAttrModel))
}

// sliceAttribute is the string attribute attr that gpuadmit's DRA driver
// publishes for the node's device (for any of its devices where device is
// empty); the test fails where none does.
func sliceAttribute(ctx context.Context, t *testing.T, n *Node, device string, attr resourceapi.QualifiedName) string {
	t.Helper()
	list, err := n.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		if s.Spec.Driver != dra.DriverName || ptr.Deref(s.Spec.NodeName, "") != n.Name {
			continue
		}
		for _, d := range s.Spec.Devices {
			if a, ok := d.Attributes[attr]; ok && a.StringValue != nil && (device == "" || d.Name == device) {
				return *a.StringValue
			}
		}
	}
	t.Fatalf("no device %q of %s on %s publishes %s", device, dra.DriverName, n.Name, attr)
	return ""
}
