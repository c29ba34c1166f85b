package replay

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/gpuadmit/gpuadmit/bench/packing"
	"github.com/gpuadmit/gpuadmit/pkg/agent"
	"github.com/gpuadmit/gpuadmit/pkg/agent/dra"
	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/claim"
	"github.com/gpuadmit/gpuadmit/pkg/intent"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// traceModels are the GPU models of the trace's nodes.
var traceModels = []string{"A10", "G2", "G3", "P100", "T4", "V100M16", "V100M32"}

// written is what a user's pod asks, as the product's path writes it.
type written struct {
	GPU, Scheduler string
	Hints          map[string]string
	Claims         int
}

func TestProductPodIsWrittenAsAUserWritesIt(t *testing.T) {
	tests := map[string]struct {
		pod  packing.Pod
		want written
	}{
		"a share is a native fraction": {pod: share, want: written{GPU: "460m"}},
		"whole GPUs are a count":       {pod: two, want: written{GPU: "2"}},
		"one GPU model is gpuadmit's model hint": {pod: packing.Pod{GPUs: 1, GPUMilli: 1000, Spec: "T4"},
			want: written{GPU: "1", Hints: map[string]string{intent.AnnotationModel: "T4"}}},
		"several models are HAMi's type list, once each": {pod: packing.Pod{GPUs: 1, GPUMilli: 250, Spec: "V100M16|V100M32|V100M32"},
			want: written{GPU: "250m", Hints: map[string]string{intent.AnnotationHAMiUseType: "V100M16,V100M32"}}},
		"a pod without GPU names its scheduler": {pod: cpu, want: written{Scheduler: "s"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := ProductPod("x", "s", tc.pod)
			c := p.Spec.Containers[0]
			got := written{Scheduler: p.Spec.SchedulerName, Hints: p.Annotations, Claims: len(p.Spec.ResourceClaims) + len(c.Resources.Claims)}
			if q, ok := c.Resources.Limits[resourceGPU]; ok {
				got.GPU = q.String()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
			if len(p.Labels) != 0 || len(c.Resources.Limits) > 1 {
				t.Errorf("labels %v, limits %v: the user writes neither gpuadmit's label nor its accounting", p.Labels, c.Resources.Limits)
			}
		})
	}
}

// TestTraceModelsMatchOnlyThemselves: HAMi's type list matches a listed
// type anywhere in a pool's model name, so "V100M16,V100M32" is exactly
// those two only because no trace model's name contains another's.
func TestTraceModelsMatchOnlyThemselves(t *testing.T) {
	for _, a := range traceModels {
		for _, b := range traceModels {
			if a != b && strings.Contains(strings.ToUpper(b), strings.ToUpper(a)) {
				t.Errorf("type %s would also match model %s", a, b)
			}
		}
	}
}

func TestProductNodeAdvertisesWhatTheDRAAgentDoes(t *testing.T) {
	n := ProductNode(t4x2)
	gpus := []agent.GPU{{Model: "T4", MemoryMiB: gpuMemoryMiB, Healthy: true}, {Model: "T4", MemoryMiB: gpuMemoryMiB, Healthy: true}}
	for r, want := range agent.DRAAccounting(gpus) {
		if got := n.Status.Allocatable[corev1.ResourceName(r)]; got.Value() != want {
			t.Errorf("%s = %s, want %d as the DRA agent advertises it", r, got.String(), want)
		}
	}
	if n.Labels[allocator.LabelNodeMode] != allocator.NodeModeDRA {
		t.Errorf("labels %v: no %s=%s", n.Labels, allocator.LabelNodeMode, allocator.NodeModeDRA)
	}
}

// traceCluster is one product node per trace model and its slice, and the
// webhook's mutator over them with the default embedded policies.
func traceCluster(t *testing.T) (*inventory.Inventory, *mutate.Mutator) {
	t.Helper()
	var nodes []corev1.Node
	var rs []resourceapi.ResourceSlice
	for i, m := range traceModels {
		n := packing.Node{Name: "n-" + strings.ToLower(m), MilliCPU: 64000, MemoryMiB: 262144, GPUs: 2 + i%2, Model: m}
		nodes, rs = append(nodes, *ProductNode(n)), append(rs, *Slice(n))
	}
	inv := inventory.BuildWithSlices(nodes, rs, allocator.Default())
	e := policy.NewEngine(policy.Options{})
	if _, err := e.Load(context.Background(), policy.Embedded()); err != nil {
		t.Fatal(err)
	}
	return inv, mutate.NewMutator(e, mutate.StaticInventory{Inv: inv}, mutate.MutatorOptions{})
}

// admit is what the API server asks the webhook for the product pod of p:
// its schedulerName defaulted before admission.
func admit(t *testing.T, m *mutate.Mutator, p packing.Pod) *corev1.Pod {
	t.Helper()
	pod := ProductPod(PodName(0, p), "", p)
	pod.Spec.SchedulerName = corev1.DefaultSchedulerName
	res, err := m.Mutate(context.Background(), mutate.Request{Pod: pod})
	if err != nil || !res.Allowed {
		t.Fatalf("%+v: allowed %v, %q, err %v", p, res.Allowed, res.Message, err)
	}
	return res.Pod
}

// TestWebhookSeesTheTraceAsDRAPools: gpuadmit's inventory puts each trace
// model's nodes in a DRA pool of that model (the catalog knows none of
// them: the GFD labels describe them), with GPUs of 1000 MiB shared in
// steps of 1 MiB, so a share of f milli-GPU is exactly f MiB.
func TestWebhookSeesTheTraceAsDRAPools(t *testing.T) {
	inv, _ := traceCluster(t)
	type pool struct {
		Model                   string
		DRA                     bool
		GPUMemoryMiB, ShareStep int64
	}
	var got, want []pool
	for _, m := range traceModels {
		want = append(want, pool{Model: m, DRA: true, GPUMemoryMiB: 1000, ShareStep: 1})
	}
	for _, p := range inv.Pools {
		got = append(got, pool{Model: p.Model, DRA: p.DRA, GPUMemoryMiB: p.GPUMemoryMiB, ShareStep: p.ShareUnitMiB})
	}
	slices.SortFunc(got, func(a, b pool) int { return strings.Compare(a.Model, b.Model) })
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pools (-want +got)\n%s\nwarnings: %v", diff, inv.Warnings)
	}
}

// TestWebhookWritesTheTracePods: the default policies, through the
// webhook's mutator, give a 460 milli-GPU pod that accepts any model a
// claim of alternatives whose shares are 460 MiB on every model; a pod of
// one model the share template of 460 MiB on that model's pool; a pod of
// two models alternatives on those two only.
func TestWebhookWritesTheTracePods(t *testing.T) {
	_, m := traceCluster(t)
	decide := func(p packing.Pod) *corev1.Pod { return admit(t, m, p) }
	shares := func(pod *corev1.Pod) []claim.Alternative {
		name := *pod.Spec.ResourceClaims[0].ResourceClaimTemplateName
		alts, ok := claim.AlternativesOf(pod.Annotations[claim.AnnotationAlternatives], name)
		if !ok {
			t.Fatalf("template %s: no alternatives in %q", name, pod.Annotations[claim.AnnotationAlternatives])
		}
		var out []claim.Alternative
		for _, a := range alts {
			if a.Backend == claim.BackendShared {
				out = append(out, a)
			}
		}
		return out
	}
	var every []claim.Alternative
	for _, model := range traceModels {
		every = append(every, claim.Alternative{Backend: claim.BackendShared, Model: model, MiB: 460})
	}
	if diff := cmp.Diff(every, shares(decide(share))); diff != "" {
		t.Errorf("any model: shares (-want +got)\n%s", diff)
	}
	v100 := share
	v100.Spec = "V100M16|V100M32"
	if diff := cmp.Diff(every[5:], shares(decide(v100))); diff != "" {
		t.Errorf("V100M16|V100M32: shares (-want +got)\n%s", diff)
	}
	t4 := share
	t4.Spec = "T4"
	one := decide(t4)
	if got := *one.Spec.ResourceClaims[0].ResourceClaimTemplateName; mutate.PoolOf(one) != "t4-whole-dra" || got != claim.TemplateName(460) {
		t.Errorf("T4 only: pool %q, template %s; want t4-whole-dra, %s", mutate.PoolOf(one), got, claim.TemplateName(460))
	}
	for _, p := range []*corev1.Pod{decide(share), one} {
		if _, err := checkProductPod(p, corev1.DefaultSchedulerName, map[string]bool{}); err != nil {
			t.Errorf("checkProductPod of the webhook's own pod: %v", err)
		}
	}
}

// TestCheckProductRefusesPodsTheWebhookDidNotWrite: the bench's own pods
// (Pod: a claim the bench made, gpuadmit's label but no record) fail the
// check, so a product-path figure cannot come from them; so does a run
// where alternatives were expected and none came, or the reverse.
func TestCheckProductRefusesPodsTheWebhookDidNotWrite(t *testing.T) {
	pods := []packing.Pod{share}
	bench := []corev1.Pod{*Pod(PodName(0, share), corev1.DefaultSchedulerName, share)}
	if _, err := checkProduct(pods, bench, corev1.DefaultSchedulerName, true); err == nil || !strings.Contains(err.Error(), "did not decide") {
		t.Errorf("the bench's own pod: err %v, want one saying the webhook did not decide it", err)
	}
	_, m := traceCluster(t)
	admitted := []corev1.Pod{*admit(t, m, share)}
	got, err := checkProduct(pods, admitted, corev1.DefaultSchedulerName, true)
	if want := (ProductCheck{Admitted: 1, Alternatives: 1, Templates: 1}); err != nil || got != want {
		t.Errorf("the webhook's pod: %+v, %v; want %+v", got, err, want)
	}
	if _, err := checkProduct(pods, admitted, corev1.DefaultSchedulerName, false); err == nil {
		t.Errorf("alternatives from a webhook told to place on one pool: no error")
	}
	if _, err := checkProduct(pods, admitted, "gpuadmit-scheduler", true); err == nil {
		t.Errorf("a pod of another scheduler: no error")
	}
}

// TestPlacementsReadTheClaimsThePodStatusNames: on the product's path a
// pod's claims are named by the resourceclaim controller (from its
// template) and by the scheduler (for nvidia.com/gpu), not after the pod.
func TestPlacementsReadTheClaimsThePodStatusNames(t *testing.T) {
	pods := []packing.Pod{share, two}
	objs := []corev1.Pod{{}, {}}
	objs[0].Name, objs[0].Spec.NodeName = PodName(0, share), "n0"
	objs[0].Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpuadmit-main", ResourceClaimName: ptr.To("share-claim")}}
	objs[1].Name, objs[1].Spec.NodeName = PodName(1, two), "n0"
	objs[1].Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "two-claim"}
	alloc := func(name string, consumed *resource.Quantity, gpus ...int) resourceapi.ResourceClaim {
		c := resourceapi.ResourceClaim{}
		c.Name = name
		c.Status.Allocation = &resourceapi.AllocationResult{}
		for _, g := range gpus {
			r := resourceapi.DeviceRequestAllocationResult{Request: "gpu/shared0", Driver: dra.DriverName, Pool: "n0", Device: dra.GPUDeviceName(g)}
			if consumed != nil {
				r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{dra.CapacityMemory: *consumed}
			}
			c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, r)
		}
		return c
	}
	claims := []resourceapi.ResourceClaim{alloc("share-claim", resource.NewQuantity(460<<20, resource.BinarySI), 1), alloc("two-claim", nil, 0, 1)}
	got, err := Placements(pods, objs, claims)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Placement{{Node: "n0", GPUs: []int{1}}, {Node: "n0", GPUs: []int{0, 1}}}, got); diff != "" {
		t.Errorf("placements (-want +got)\n%s", diff)
	}
}
