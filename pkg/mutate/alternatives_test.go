package mutate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/claim"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/decide"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// draDevice is a device of gpuadmit's driver: a MIG instance of profile
// (profile set) or a GPU whose memory claims share in 1 GiB steps.
func draDevice(name, model, profile string, mib int64) resourceapi.Device {
	attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		"type": {StringValue: ptr.To("gpu")}, "model": {StringValue: ptr.To(model)}}
	capacity := resourceapi.DeviceCapacity{Value: *resource.NewQuantity(mib<<20, resource.BinarySI)}
	d := resourceapi.Device{Name: name, Attributes: attrs}
	if profile != "" {
		attrs["type"] = resourceapi.DeviceAttribute{StringValue: ptr.To("mig")}
		attrs["profile"] = resourceapi.DeviceAttribute{StringValue: ptr.To(profile)}
	} else {
		gib := resource.MustParse("1Gi")
		d.AllowMultipleAllocations = ptr.To(true)
		capacity.RequestPolicy = &resourceapi.CapacityRequestPolicy{ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: &gib, Step: &gib}}
	}
	d.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": capacity}
	return d
}

// draPoolNode is a node of the named pool whose GPUs gpuadmit's driver
// publishes as devs, advertising its accounting capacity as the DRA agent does.
func draPoolNode(name, pool, product, model string, mib int64, devs ...resourceapi.Device) (corev1.Node, resourceapi.ResourceSlice) {
	n := gpuNode(name, product, map[string]string{allocator.LabelNodeMode: allocator.NodeModeDRA, inventory.LabelPool: pool},
		map[string]int64{inventory.ResourceMemoryMiB: allocator.QuotaOnlyMiB, inventory.ModelResource(model): mib})
	s := resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: allocator.DRADriver, NodeName: ptr.To(name),
		Pool: resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1}, Devices: devs}}
	return n, s
}

// altInventory is two DRA pools: h100, an H100 with two 1g.10gb MIG
// instances, and a100, a shareable A100 40GB; with extra nodes as they are.
func altInventory(extra ...corev1.Node) *inventory.Inventory {
	h, hs := draPoolNode("h100-0", "h100", "NVIDIA-H100-80GB-HBM3", "H100-80GB", 2*9984,
		draDevice("mig-0", "H100-80GB", "1g.10gb", 9984), draDevice("mig-1", "H100-80GB", "1g.10gb", 9984))
	a, as := draPoolNode("a100-0", "a100", "NVIDIA-A100-SXM4-40GB", "A100-40GB", 40960, draDevice("gpu-0", "A100-40GB", "", 40960))
	return inventory.BuildWithSlices(append([]corev1.Node{h, a}, extra...), []resourceapi.ResourceSlice{hs, as}, allocator.Default())
}

func altMutator(extra ...corev1.Node) *Mutator {
	return NewMutator(defaultEngine, StaticInventory{Inv: altInventory(extra...)}, MutatorOptions{})
}

// The default policies offer an 8 GiB request the smallest MIG slice that
// holds it, then a share, then a whole GPU: in that order, all three.
var eightGiB = []claim.Alternative{
	{Backend: "mig", Model: "H100-80GB", Profile: "1g.10gb", Count: 1},
	{Backend: "shared", Model: "A100-40GB", MiB: 8192},
	{Backend: "whole", Model: "A100-40GB", Count: 1},
}

// TestAlternativesOnDRAPools: a pod whose policy accepts two DRA pools is
// pinned to neither: its container's claim lists every alternative in the
// policy's order, it requests only gpuadmit.io/gpu-memory-mib at the
// largest alternative's MiB, it tolerates every pool's taints, and the
// record names every alternative. Deciding again changes nothing.
func TestAlternativesOnDRAPools(t *testing.T) {
	m := altMutator()
	res := mustMutate(t, m, pod("p", map[string]string{"gpuadmit.io/gpu-memory": "8Gi"}))
	got := res.Pod
	tmpl := claim.AlternativesTemplateName(eightGiB)
	if diff := cmp.Diff(podClaims{Pod: map[string]string{"gpuadmit-a": tmpl}, Containers: map[string][]string{"a": {"gpuadmit-a"}}}, claimsOf(got)); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}
	if alts, ok := claim.AlternativesOf(got.Annotations[claim.AnnotationAlternatives], tmpl); !ok || !cmp.Equal(alts, eightGiB) {
		t.Errorf("%s = %s, want %s's alternatives %v", claim.AnnotationAlternatives, got.Annotations[claim.AnnotationAlternatives], tmpl, eightGiB)
	}
	want := map[string]string{inventory.ResourceMemoryMiB: "40960"} // the whole A100
	if diff := cmp.Diff(want, accountingResources(got.Spec.Containers[0])); diff != "" {
		t.Errorf("accounting (-want +got):\n%s", diff)
	}
	if g := gpuResources(got.Spec.Containers[0]); len(g) != 0 {
		t.Errorf("GPU resources %v, want none: the claim gives the GPU", g)
	}
	if len(got.Spec.NodeSelector) != 0 || got.Spec.Affinity != nil {
		t.Errorf("nodeSelector %v, affinity %v: the pod is pinned", got.Spec.NodeSelector, got.Spec.Affinity)
	}
	decision := got.Annotations[record.AnnotationDecision]
	for _, s := range []string{"1) 1 MIG 1g.10gb slice(s) of an H100-80GB (9984 MiB) on pool h100", "2) a share of 8192 MiB of one A100-40GB on pool a100",
		"3) 1 whole A100-40GB GPU(s) (40960 MiB) on pool a100", "alternatives on pools h100, a100"} {
		if !strings.Contains(decision, s) {
			t.Errorf("decision %q does not name %q", decision, s)
		}
	}
	if p := PoolOf(got); p != "" {
		t.Errorf("PoolOf = %q, want none", p)
	}
	if !strings.Contains(res.Explanation, "pinned to no pool") || !strings.Contains(res.Explanation, tmpl) {
		t.Errorf("explanation %q does not say the pod is pinned to no pool and name its template", res.Explanation)
	}
	again, err := m.Mutate(context.Background(), Request{Pod: got})
	if err != nil || !again.Allowed || len(again.Patch) != 0 {
		t.Errorf("deciding again: allowed %v, patch %v, err %v, message %q; want allowed, no patch", again.Allowed, again.Patch, err, again.Message)
	}
}

// TestAlternativesSharedByPodsThatAcceptTheSame: one template per distinct
// list of alternatives and sizes: two pods that accept the same share one;
// a container of another size gets another.
func TestAlternativesSharedByPodsThatAcceptTheSame(t *testing.T) {
	m := altMutator()
	a := mustMutate(t, m, pod("a", map[string]string{"gpuadmit.io/gpu-memory": "8Gi"}))
	b := mustMutate(t, m, pod("b", map[string]string{"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8192"}))
	c := mustMutate(t, m, pod("c", map[string]string{"gpuadmit.io/gpu-memory": "4Gi"}))
	ta, tb, tc := claimsOf(a.Pod).Pod["gpuadmit-a"], claimsOf(b.Pod).Pod["gpuadmit-a"], claimsOf(c.Pod).Pod["gpuadmit-a"]
	if ta != tb {
		t.Errorf("two pods that accept the same alternatives name templates %s and %s", ta, tb)
	}
	if ta == tc || !claim.IsAlternativesName(tc) {
		t.Errorf("4 GiB names template %s, 8 GiB %s: want another alternatives template", tc, ta)
	}
}

// TestOnePoolOnlyIsWrittenAsBefore: where the policy allows one pool only
// (a model hint), or where the first candidate that fits is a device
// plugin's pool, the pod is pinned to one pool as before.
func TestOnePoolOnlyIsWrittenAsBefore(t *testing.T) {
	// A100 MIG slices of a device plugin: 1g.5gb (4864 MiB) is the smallest
	// slice holding 4 GiB, so it comes first.
	plugin := advertising(gpuNode("mig-0", "NVIDIA-A100-SXM4-40GB", map[string]string{"nvidia.com/mig.strategy": "mixed"},
		map[string]int64{"nvidia.com/mig-1g.5gb": 7}))
	tests := map[string]struct {
		m        *Mutator
		pod      *corev1.Pod
		wantPool string
	}{
		"a model hint": {m: altMutator(), pod: func() *corev1.Pod {
			p := pod("p", map[string]string{"gpuadmit.io/gpu-memory": "8Gi"})
			p.Annotations = map[string]string{"gpuadmit.io/model": "A100-40GB"}
			return p
		}(), wantPool: "a100"},
		"a device plugin's pool first": {m: altMutator(plugin), pod: pod("p", map[string]string{"gpuadmit.io/gpu-memory": "4Gi"}),
			wantPool: "a100-40gb-mig-mixed"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := mustMutate(t, tc.m, tc.pod).Pod
			if p := PoolOf(got); p != tc.wantPool {
				t.Errorf("pool %q, want %q", p, tc.wantPool)
			}
			if _, ok := got.Annotations[claim.AnnotationAlternatives]; ok || len(got.Spec.NodeSelector) == 0 {
				t.Errorf("alternatives %q, nodeSelector %v: want one pool, pinned", got.Annotations[claim.AnnotationAlternatives], got.Spec.NodeSelector)
			}
		})
	}
}

// TestNoAlternativesPlacesOnOnePool: with NoAlternatives (clusters
// without the prioritized list) the pod that TestAlternativesOnDRAPools
// gives alternatives is placed on the policy's first candidate that fits,
// the H100 slice, pinned to its pool, with no claim of alternatives.
func TestNoAlternativesPlacesOnOnePool(t *testing.T) {
	m := NewMutator(defaultEngine, StaticInventory{Inv: altInventory()}, MutatorOptions{NoAlternatives: true})
	got := mustMutate(t, m, pod("p", map[string]string{"gpuadmit.io/gpu-memory": "8Gi"})).Pod
	if p := PoolOf(got); p != "h100" {
		t.Errorf("pool %q, want h100", p)
	}
	if a, ok := got.Annotations[claim.AnnotationAlternatives]; ok {
		t.Errorf("%s = %s, want none", claim.AnnotationAlternatives, a)
	}
	if len(got.Spec.NodeSelector) == 0 {
		t.Errorf("no nodeSelector: the pod is not pinned to its pool")
	}
	for _, c := range got.Spec.ResourceClaims {
		if c.ResourceClaimTemplateName != nil && claim.IsAlternativesName(*c.ResourceClaimTemplateName) {
			t.Errorf("claim %s from alternatives template %s", c.Name, *c.ResourceClaimTemplateName)
		}
	}
}

// TestAlternativesDropModelsOverQuota: a per-model quota with no room for
// an alternative drops it, and the charge is the largest of those left.
func TestAlternativesDropModelsOverQuota(t *testing.T) {
	q := &corev1.ResourceQuota{}
	q.Name = "gpuadmit"
	q.Status.Hard = corev1.ResourceList{"requests.gpuadmit.io/a100-40gb-mib": resource.MustParse("20000")}
	q.Status.Used = corev1.ResourceList{"requests.gpuadmit.io/a100-40gb-mib": resource.MustParse("4000")}
	res, err := altMutator().Mutate(context.Background(), Request{Pod: pod("p", map[string]string{"gpuadmit.io/gpu-memory": "8Gi"}), Quota: q})
	if err != nil || !res.Allowed {
		t.Fatalf("Mutate: %v, %q", err, res.Message)
	}
	want := eightGiB[:2] // the whole A100 (40960 MiB) does not fit the 16000 MiB left
	if _, ok := claim.AlternativesOf(res.Pod.Annotations[claim.AnnotationAlternatives], claim.AlternativesTemplateName(want)); !ok {
		t.Errorf("%s = %s, want the alternatives %v", claim.AnnotationAlternatives, res.Pod.Annotations[claim.AnnotationAlternatives], want)
	}
	if diff := cmp.Diff(map[string]string{inventory.ResourceMemoryMiB: "9984"}, accountingResources(res.Pod.Spec.Containers[0])); diff != "" {
		t.Errorf("accounting (-want +got):\n%s", diff)
	}
	if !strings.Contains(res.Explanation, "quota on gpuadmit.io/a100-40gb-mib has 16000 MiB left") {
		t.Errorf("explanation %q does not say why the whole A100 was left out", res.Explanation)
	}
}

// sameCandidates decides every pod the same: the candidates, for every container.
type sameCandidates []policy.Candidate

func (e sameCandidates) Evaluate(_ context.Context, in policy.Input) (policy.Decision, error) {
	d := policy.Decision{Revision: "fixed", Placement: map[string][]policy.Candidate{}}
	for _, c := range in.Containers {
		d.Placement[c.Container] = e
	}
	return d, nil
}

// TestAlternativesOfOneScheduler: alternatives span the pools of the first
// one's scheduler only, the others are left out and named; where
// gpuadmit-scheduler owns the pools, the pod names it, and the record
// names every pool it may wait on, for the handover.
func TestAlternativesOfOneScheduler(t *testing.T) {
	mig := policy.Candidate{Pool: "h100", Backend: "mig", Rule: "r1"}
	share := policy.Candidate{Pool: "a100", Backend: "shared", Rule: "r2"}
	whole := policy.Candidate{Pool: "a100", Backend: "whole", Rule: "r3", SchedulerName: "other-scheduler"}
	inv := StaticInventory{Inv: altInventory()}
	p := pod("p", map[string]string{"gpuadmit.io/gpu-memory": "8Gi"})

	res := mustMutate(t, NewMutator(sameCandidates{mig, share, whole}, inv, MutatorOptions{}), p)
	want := eightGiB[:2]
	if _, ok := claim.AlternativesOf(res.Pod.Annotations[claim.AnnotationAlternatives], claim.AlternativesTemplateName(want)); !ok {
		t.Errorf("%s = %s, want %v", claim.AnnotationAlternatives, res.Pod.Annotations[claim.AnnotationAlternatives], want)
	}
	if len(res.PassedOver) != 1 || !strings.Contains(res.PassedOver[0], "scheduled by other-scheduler") {
		t.Errorf("left out %q, want the whole A100 of another scheduler", res.PassedOver)
	}

	mig.SchedulerName, share.SchedulerName = decide.GPUAdmitScheduler, decide.GPUAdmitScheduler
	owned := p.DeepCopy()
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: "u", Controller: ptr.To(true)}}
	res = mustMutate(t, NewMutator(sameCandidates{mig, share}, inv, MutatorOptions{}), owned)
	if pools := PoolsOf(res.Pod); !cmp.Equal(pools, []string{"h100", "a100"}) || res.Pod.Spec.SchedulerName != decide.GPUAdmitScheduler {
		t.Errorf("pools %q, scheduler %q; want h100 and a100, under %s", pools, res.Pod.Spec.SchedulerName, decide.GPUAdmitScheduler)
	}
}

// TestSealedAlternatives: the seal covers what alternatives write. A pod
// with alternatives comes back unchanged; a claim pointed at another
// template, or an edited list of alternatives (which the reconciler would
// make the template from), is denied.
func TestSealedAlternatives(t *testing.T) {
	m := NewMutator(defaultEngine, StaticInventory{Inv: altInventory()}, MutatorOptions{RecordKeys: record.KeySet{Current: key1}})
	admitted := mustMutate(t, m, pod("p", map[string]string{"gpuadmit.io/gpu-memory": "8Gi"})).Pod
	if res := mustMutate(t, m, admitted.DeepCopy()); !res.Allowed || len(res.Patch) != 0 {
		t.Fatalf("the sealed pod comes back: allowed %v, patch %v, message %q; want allowed unchanged", res.Allowed, res.Patch, res.Message)
	}
	wider := claim.AlternativesTemplateName([]claim.Alternative{{Backend: "whole", Model: "H100-80GB", Count: 8}})
	tests := map[string]func(p *corev1.Pod){
		"another template": func(p *corev1.Pod) { p.Spec.ResourceClaims[0].ResourceClaimTemplateName = ptr.To(wider) },
		"edited alternatives": func(p *corev1.Pod) {
			p.Annotations[claim.AnnotationAlternatives] = claim.EncodeAlternatives(map[string][]claim.Alternative{
				wider: {{Backend: "whole", Model: "H100-80GB", Count: 8}}})
		},
	}
	for name, edit := range tests {
		t.Run(name, func(t *testing.T) {
			p := admitted.DeepCopy()
			edit(p)
			if res := mustMutate(t, m, p); res.Allowed {
				t.Errorf("allowed a pod whose alternatives were edited (patch %v)", res.Patch)
			}
		})
	}
}

// TestAlternativesNeverReachAPoolNotOffered: an alternative selects its
// devices by model; where another DRA pool of that model and form exists
// that the policy did not offer (here h100-b, an operator's second H100 MIG
// pool), the pod is placed on one pool as before.
func TestAlternativesNeverReachAPoolNotOffered(t *testing.T) {
	b, bs := draPoolNode("h100-b-0", "h100-b", "NVIDIA-H100-80GB-HBM3", "H100-80GB", 9984, draDevice("mig-0", "H100-80GB", "1g.10gb", 9984))
	h, hs := draPoolNode("h100-0", "h100", "NVIDIA-H100-80GB-HBM3", "H100-80GB", 9984, draDevice("mig-0", "H100-80GB", "1g.10gb", 9984))
	a, as := draPoolNode("a100-0", "a100", "NVIDIA-A100-SXM4-40GB", "A100-40GB", 40960, draDevice("gpu-0", "A100-40GB", "", 40960))
	inv := inventory.BuildWithSlices([]corev1.Node{h, a, b}, []resourceapi.ResourceSlice{hs, as, bs}, allocator.Default())
	offer := sameCandidates{{Pool: "h100", Backend: "mig"}, {Pool: "a100", Backend: "shared"}}
	p := pod("p", map[string]string{"gpuadmit.io/gpu-memory": "8Gi"})
	got := mustMutate(t, NewMutator(offer, StaticInventory{Inv: inv}, MutatorOptions{}), p).Pod
	if PoolOf(got) != "h100" {
		t.Errorf("pool %q, alternatives %q; want pool h100, pinned", PoolOf(got), got.Annotations[claim.AnnotationAlternatives])
	}
	teamB := corev1.Toleration{Key: "team", Operator: corev1.TolerationOpEqual, Value: "b", Effect: corev1.TaintEffectNoSchedule}
	both := append(offer, policy.Candidate{Pool: "h100-b", Backend: "mig", Tolerations: []corev1.Toleration{teamB}})
	got = mustMutate(t, NewMutator(both, StaticInventory{Inv: inv}, MutatorOptions{}), p).Pod
	if !strings.Contains(got.Annotations[record.AnnotationDecision], "alternatives on pools h100, a100, h100-b") {
		t.Errorf("decision %q: want alternatives on every pool offered", got.Annotations[record.AnnotationDecision])
	}
	if !slices.Contains(got.Spec.Tolerations, teamB) {
		t.Errorf("tolerations %v: want h100-b's, where its alternative may be allocated", got.Spec.Tolerations)
	}
}

// TestAlternativesAtMostEight: a claim request lists at most 8
// alternatives (the API's limit); the policy's further candidates are left
// out and named.
func TestAlternativesAtMostEight(t *testing.T) {
	profiles := []string{"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}
	var devs []resourceapi.Device
	var offer sameCandidates
	for i, p := range profiles {
		devs = append(devs, draDevice(fmt.Sprintf("mig-%d", i), "H100-80GB", p, 9984))
		offer = append(offer, policy.Candidate{Pool: "h100", Backend: "mig", Profile: p})
	}
	offer = append(offer, policy.Candidate{Pool: "a100", Backend: "shared"}, policy.Candidate{Pool: "a100", Backend: "whole"})
	h, hs := draPoolNode("h100-0", "h100", "NVIDIA-H100-80GB-HBM3", "H100-80GB", 81559, devs...)
	a, as := draPoolNode("a100-0", "a100", "NVIDIA-A100-SXM4-40GB", "A100-40GB", 40960, draDevice("gpu-0", "A100-40GB", "", 40960))
	inv := inventory.BuildWithSlices([]corev1.Node{h, a}, []resourceapi.ResourceSlice{hs, as}, allocator.Default())
	res := mustMutate(t, NewMutator(offer, StaticInventory{Inv: inv}, MutatorOptions{}), pod("p", map[string]string{"gpuadmit.io/gpu-memory": "8Gi"}))
	decision := res.Pod.Annotations[record.AnnotationDecision]
	if !strings.Contains(decision, "8) a share of 8192 MiB") || strings.Contains(decision, "9)") {
		t.Errorf("decision %q: want 8 alternatives, the share last", decision)
	}
	if len(res.PassedOver) != 1 || !strings.Contains(res.PassedOver[0], "whole candidate on pool a100: beyond the 8 alternatives") {
		t.Errorf("left out %q, want the whole A100, beyond the 8", res.PassedOver)
	}
}

// TestAlternativesPerContainer: each GPU container has its own claim and
// template, sized for it, and its own charge; the pod decided again is unchanged.
func TestAlternativesPerContainer(t *testing.T) {
	m := altMutator()
	got := mustMutate(t, m, pod("p", map[string]string{"gpuadmit.io/gpu-memory": "8Gi"}, map[string]string{"gpuadmit.io/gpu-memory": "4Gi"})).Pod
	four := []claim.Alternative{
		{Backend: "mig", Model: "H100-80GB", Profile: "1g.10gb", Count: 1},
		{Backend: "shared", Model: "A100-40GB", MiB: 4096},
		{Backend: "whole", Model: "A100-40GB", Count: 1},
	}
	want := podClaims{
		Pod:        map[string]string{"gpuadmit-a": claim.AlternativesTemplateName(eightGiB), "gpuadmit-b": claim.AlternativesTemplateName(four)},
		Containers: map[string][]string{"a": {"gpuadmit-a"}, "b": {"gpuadmit-b"}},
	}
	if diff := cmp.Diff(want, claimsOf(got)); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}
	for i, c := range got.Spec.Containers {
		if diff := cmp.Diff(map[string]string{inventory.ResourceMemoryMiB: "40960"}, accountingResources(c)); diff != "" {
			t.Errorf("container %d accounting (-want +got):\n%s", i, diff)
		}
	}
	if again := mustMutate(t, m, got); !again.Allowed || len(again.Patch) != 0 {
		t.Errorf("deciding again: allowed %v, patch %v, message %q", again.Allowed, again.Patch, again.Message)
	}
}

// countingCapacity has no pods, and records the pools admissions charge.
type countingCapacity struct{ charged []string }

func (c *countingCapacity) Held(context.Context, *inventory.Pool) inventory.Held {
	return inventory.Held{}
}
func (c *countingCapacity) Admitted(_ *corev1.Pod, pool string, _ map[string]int64) {
	c.charged = append(c.charged, pool)
}

// TestAlternativesChargeNoPoolInTheLedger: a pod placed by DRA alternatives
// holds no pool's room in the webhook (the scheduler counts its devices);
// a pod pinned to one pool does, until the cache shows it.
func TestAlternativesChargeNoPoolInTheLedger(t *testing.T) {
	c := &countingCapacity{}
	m := NewMutator(defaultEngine, StaticInventory{Inv: altInventory()}, MutatorOptions{Capacity: c})
	if res := mustMutate(t, m, pod("alt", map[string]string{"gpuadmit.io/gpu-memory": "8Gi"})); PoolOf(res.Pod) != "" {
		t.Fatalf("8 GiB pod was pinned to %s, want alternatives", PoolOf(res.Pod))
	}
	if len(c.charged) != 0 {
		t.Errorf("a pod with alternatives charged pools %v in the ledger, want none", c.charged)
	}
	one := mustMutate(t, m, pod("one", map[string]string{"gpuadmit.io/gpu-memory": "20Gi"}))
	if diff := cmp.Diff([]string{PoolOf(one.Pod)}, c.charged); PoolOf(one.Pod) == "" || diff != "" {
		t.Errorf("a pod pinned to one pool (%q) charged (-want +got):\n%s", PoolOf(one.Pod), diff)
	}
}
