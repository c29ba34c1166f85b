package webhook

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/claim"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// h100DRA is a DRA pool of one H100 node, n1, with one whole GPU and two
// 1g.10gb MIG devices.
func h100DRA() *inventory.Pool {
	model := inventory.ModelResource("H100-80GB")
	n := inventory.Node{Name: "n1", Allocatable: map[string]int64{
		inventory.ResourceGPU: 1, inventory.MIGResource("1g.10gb"): 2, model: 81559 + 2*9984,
	}}
	return &inventory.Pool{
		Name: "h100-80gb-dra", Model: "H100-80GB", DRA: true, GPUMemoryMiB: 81559, ModelResource: model,
		Profiles:    []inventory.Profile{{Profile: allocator.Profile{Name: "1g.10gb", MemoryMiB: 9984}, Resource: inventory.MIGResource("1g.10gb")}},
		Nodes:       []inventory.Node{n},
		Allocatable: n.Allocatable,
	}
}

// altClaim is a claim from the alternatives template of a pod that accepts
// a 1g.10gb slice, a whole GPU or a 4 GiB share of an H100 (subrequests
// mig0, whole1, shared2), allocated sub on node, or not at all ("").
func altClaim(name, node, sub string) *resourceapi.ResourceClaim {
	alts := []claim.Alternative{
		{Backend: claim.BackendMIG, Model: "H100-80GB", Profile: "1g.10gb", Count: 1},
		{Backend: claim.BackendWhole, Model: "H100-80GB", Count: 1},
		{Backend: claim.BackendShared, Model: "H100-80GB", MiB: 4096},
	}
	c := &resourceapi.ResourceClaim{Spec: claim.AlternativesTemplate("ns", alts).Spec.Spec}
	c.Namespace, c.Name = "ns", name
	c.Labels = claim.AlternativesTemplate("ns", alts).Spec.ObjectMeta.Labels
	if sub == "" {
		return c
	}
	r := resourceapi.DeviceRequestAllocationResult{Request: claim.Request + "/" + sub, Driver: allocator.DRADriver, Pool: node, Device: "dev-" + name}
	if sub == "shared2" {
		r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{allocator.DRACapacityMemory: resource.MustParse("4Gi")}
	}
	c.Status.Allocation = &resourceapi.AllocationResult{
		Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{r}},
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}},
	}
	return c
}

// TestHeldCountsDevicesOfAlternativesPods: a pod with DRA alternatives
// requests no GPU resource of a pool, so the pod tally does not see the
// devices its claim was allocated. The webhook's view of a DRA pool counts
// them on the node they were allocated on, under the names a pod placed on
// that pool asks for the same devices, and at their real MiB; a claim of
// another node, one not allocated, and one not made from an alternatives
// template count for nothing. With the pool's one whole GPU taken by such
// a pod, a pod asking for a whole GPU there no longer finds it free.
func TestHeldCountsDevicesOfAlternativesPods(t *testing.T) {
	pool := h100DRA()
	capa := newCapacity(nil, logr.Discard())
	capa.claims = newAltClaims()
	h := capa.claims.Handler()
	whole := altClaim("whole", "n1", "whole1")
	unlabelled := altClaim("by-hand", "n1", "whole1")
	unlabelled.Labels = nil
	for _, c := range []*resourceapi.ResourceClaim{
		whole, altClaim("slice", "n1", "mig0"), altClaim("share", "n1", "shared2"),
		altClaim("elsewhere", "n2", "whole1"), altClaim("waiting", "", ""), unlabelled,
	} {
		h.OnAdd(c, false)
	}
	model := pool.ModelResource
	want := map[string]map[string]int64{"n1": {inventory.ResourceGPU: 1, inventory.MIGResource("1g.10gb"): 1, model: 81559 + 9984 + 4096}}
	held := capa.Held(context.Background(), pool)
	if diff := cmp.Diff(want, held.ByNode); diff != "" {
		t.Errorf("held on the pool's nodes (-want +got):\n%s", diff)
	}
	onePool := map[string]int64{inventory.ResourceGPU: 1, model: 81559}
	if held.FitsNode(pool.Nodes, onePool, nil) {
		t.Errorf("a whole GPU fits n1, whose one GPU an alternatives pod holds")
	}

	h.OnDelete(whole)
	held = capa.Held(context.Background(), pool)
	want = map[string]map[string]int64{"n1": {inventory.MIGResource("1g.10gb"): 1, model: 9984 + 4096}}
	if diff := cmp.Diff(want, held.ByNode); diff != "" {
		t.Errorf("after the whole GPU's claim is deleted (-want +got):\n%s", diff)
	}
	if !held.FitsNode(pool.Nodes, onePool, nil) {
		t.Errorf("the whole GPU does not fit n1 once its claim is gone")
	}
}
