package placement_test

import (
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// modelSlice is draSlice with gpus GPUs of gibs GiB of model.
func modelSlice(nodeName, model string, gpus int, gibs int64) *resourceapi.ResourceSlice {
	s := draSlice(nodeName, gpus)
	for i := range s.Spec.Devices {
		d := &s.Spec.Devices[i]
		d.Attributes[allocator.DRAAttrModel] = resourceapi.DeviceAttribute{StringValue: ptr.To(model)}
		c := d.Capacity[allocator.DRACapacityMemory]
		c.Value, c.RequestPolicy.Default = *resource.NewQuantity(gibs*gib, resource.BinarySI), resource.NewQuantity(gibs*gib, resource.BinarySI)
		d.Capacity[allocator.DRACapacityMemory] = c
	}
	return s
}

// shareAlternatives is a claim as gpuadmit's webhook writes it for a
// container that accepts a share of gibs GiB on each of models, in order
// (pkg/claim.AlternativesSpec).
func shareAlternatives(name string, gibs int64, models ...string) *resourceapi.ResourceClaim {
	c := shareClaim(name, gibs)
	ex := c.Spec.Devices.Requests[0].Exactly
	c.Spec.Devices.Requests[0].Exactly = nil
	for i, m := range models {
		c.Spec.Devices.Requests[0].FirstAvailable = append(c.Spec.Devices.Requests[0].FirstAvailable, resourceapi.DeviceSubRequest{
			Name: fmt.Sprintf("shared%d", i), DeviceClassName: ex.DeviceClassName, AllocationMode: ex.AllocationMode, Count: 1,
			Capacity: ex.Capacity, Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: fmt.Sprintf("device.attributes[%q].%s == %q", allocator.DRADriver, allocator.DRAAttrModel, m)}}},
		})
	}
	return c
}

// TestAlternativesAreScoredAcrossModels: a pod that accepts a 10 GiB share
// of an H100 first, else of an A100, is scored on the nodes of both
// models by what it would take there. The idle H100 node is its first
// alternative, but on a100-last the share fills the last 10 GiB of a GPU,
// which costs less than opening an idle GPU by more than the step down
// the list: GPUAdmit ranks a100-last first. On a100-full no alternative
// fits: it is ranked last. (Before, the plugin did not size such pods and
// gave every node the same score.)
func TestAlternativesAreScoredAcrossModels(t *testing.T) {
	objs := []runtime.Object{
		modelSlice("h100-idle", "H100-80GB", 2, 80),
		modelSlice("a100-last", "A100-40GB", 2, 40), heldClaim("a", "a100-last", "gpu-0", 30), heldClaim("b", "a100-last", "gpu-1", 40),
		modelSlice("a100-full", "A100-40GB", 1, 40), heldClaim("c", "a100-full", "gpu-0", 35),
		shareAlternatives("want", 10, "H100-80GB", "A100-40GB"),
	}
	var c cluster
	c.add(node("h100-idle"))
	c.add(node("a100-last"), claimPod("pa", "a"), claimPod("pb", "b"))
	c.add(node("a100-full"), claimPod("pc", "c"))
	e := newEnv(t, `{"workload":[{"gpuMemory":"10Gi","weight":1},{"gpuMemory":"20Gi","weight":1}]}`, c, objs...)
	got, _ := e.scores(t, claimPod("new", "want"))
	if !(got["a100-last"] > got["h100-idle"] && got["h100-idle"] > got["a100-full"]) || got["a100-full"] != fwk.MinNodeScore {
		t.Errorf("scores %v: want a100-last above h100-idle above a100-full (%d)", got, fwk.MinNodeScore)
	}
}

// TestAlternativesOrderBreaksTies: two idle nodes alike but for their
// GPUs' model, so that a share costs the same on either and best fit
// ties too: the pod's first alternative decides, in either order. (The
// step down the list is that tie-break and no more: a later alternative
// that costs less wins, TestAlternativesAreScoredAcrossModels.)
func TestAlternativesOrderBreaksTies(t *testing.T) {
	for _, order := range [][]string{{"H100-80GB", "A100-40GB"}, {"A100-40GB", "H100-80GB"}} {
		objs := []runtime.Object{
			modelSlice("h100", "H100-80GB", 2, 40), modelSlice("a100", "A100-40GB", 2, 40),
			shareAlternatives("want", 10, order...),
		}
		var c cluster
		c.add(node("h100"))
		c.add(node("a100"))
		e := newEnv(t, `{"workload":[{"gpuMemory":"10Gi","weight":1}]}`, c, objs...)
		got, _ := e.scores(t, claimPod("new", "want"))
		first, second := "h100", "a100"
		if order[0] == "A100-40GB" {
			first, second = second, first
		}
		if got[first] <= got[second] {
			t.Errorf("order %v: scores %v, want %s, the first alternative's node, above %s", order, got, first, second)
		}
	}
}
