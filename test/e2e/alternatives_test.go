package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpuadmit/gpuadmit/internal/fakegpu"
	"github.com/gpuadmit/gpuadmit/pkg/agent"
	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/claim"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
	"github.com/gpuadmit/gpuadmit/policies"
)

// The alternatives tests run under the stock scheduler (kube-scheduler
// v1.37, DynamicResources with prioritized lists), on two DRA pools of kwok
// nodes whose slices the DRA agent publishes: alt-h100-* is an H100 (fake
// NVML answering as the real H100 reading) with MIG on and one 1g.10gb
// instance, alt-a100-* one shareable A100 40GB. One node per model, so
// where a pod lands follows from the order of its alternatives alone.
//
// The policy version "alternatives" offers every GPU container a 1g.10gb
// slice on the H100 pool, else a share on the A100 pool, in that order, of
// each pool's owner (the stock scheduler unless gpuadmit-scheduler runs):
// the default placement.rego with its placement rule replaced (its
// helpers, which decision.rego uses, kept).
const altPlacement = `placement[c.name] := [
	{"pool": "alt-h100", "backend": "mig", "profile": "1g.10gb", "rule": "e2e/h100-slice", "schedulerName": pool_owners["alt-h100"]},
	{"pool": "alt-a100", "backend": "shared", "rule": "e2e/a100-share", "schedulerName": pool_owners["alt-a100"]},
] if some c in input.containers`

// altPlacementTest replaces decision_test.rego, which tests the default
// placement: a set is tested before it goes live.
const altPlacementTest = `package gpuadmit

test_the_h100_slice_then_the_a100_share if {
	p := placement with input as {"containers": [{"name": "main"}], "pools": [{"name": "alt-h100"}, {"name": "alt-a100"}]}
	[c.pool | some c in p.main] == ["alt-h100", "alt-a100"]
}
`

// altQuotas: alt-quota may hold 25000 MiB of GPU memory: two pods charged
// 9984 MiB each (their largest alternative, the H100 slice), not three, as
// it would if each were charged the 8192 MiB share.
const altQuotas = `gpuadmit:
  quotas:
  - {namespaces: [alt-quota], gpuMemory: 25000Mi}
`

// useAlternatives swaps in the "alternatives" policy version until the test ends.
func useAlternatives(t *testing.T) {
	t.Helper()
	dir := filepath.Join(filepath.Dir(policyDir), "alternatives")
	raw, err := policies.FS.ReadFile("placement.rego")
	if err != nil {
		t.Fatal(err)
	}
	const rule = "placement[c.name] := candidates(c) if some c in input.containers"
	if !strings.Contains(string(raw), rule) {
		t.Fatalf("placement.rego has no rule %q to replace", rule)
	}
	files := map[string]string{"placement.rego": strings.Replace(string(raw), rule, altPlacement, 1),
		"decision_test.rego": altPlacementTest, "quotas.yaml": altQuotas}
	if err := writePolicies(dir, files); err != nil {
		t.Fatal(err)
	}
	prev := activeRevision(t)
	swapPolicies(t, "alternatives")
	t.Cleanup(func() {
		swapPolicies(t, "v1")
		// The webhook reloads the set a moment later; a test that runs next
		// (FirstHour) must not be decided by the alternatives policy.
		waitFor(t, "the webhook back on revision "+prev, 30*time.Second, func() (bool, string) {
			r := env.Readyz()
			return strings.Contains(r, "revision "+prev+" "), r
		})
	})
}

// activeRevision is the policy revision the webhook reports active.
func activeRevision(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`revision (\S+) from`).FindStringSubmatch(env.Readyz())
	if m == nil {
		t.Fatalf("readyz names no active policy revision: %s", env.Readyz())
	}
	return m[1]
}

// altNodes starts the two pools' nodes, suffixed, and waits until the
// webhook gives an 8 GiB pod of ns both as alternatives.
func altNodes(t *testing.T, ctx context.Context, ns, suffix string) {
	t.Helper()
	draNamespace(t, ctx, "alt-classes-"+suffix) // deploy/dra's DeviceClasses and policies
	h100, err := fakegpu.New(fakegpu.Config{
		Readings: filepath.Join(root, "pkg/allocator/testdata/nvml"),
		GPUs:     []fakegpu.GPUConfig{{Reading: "h100-80gb-hbm3-raw.txt", MIG: []string{"1g.10gb"}}},
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	altPoolNode(t, ctx, "alt-h100-"+suffix, "alt-h100", "NVIDIA-H100-80GB-HBM3", h100)
	altPoolNode(t, ctx, "alt-a100-"+suffix, "alt-a100", "NVIDIA-A100-SXM4-40GB", fakeGPUs(1))
	waitFor(t, "the webhook gives the alternatives policy's alternatives on both pools", 60*time.Second, func() (bool, string) {
		q := altPod(ns, "probe", "8Gi")
		// A controller's pod, which gpuadmit-scheduler may get too.
		q.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "probe", UID: "probe", Controller: ptr.To(true)}}
		if err := env.Client.Create(ctx, q, client.DryRunAll); err != nil {
			return false, err.Error()
		}
		d := q.Annotations[record.AnnotationDecision]
		return strings.Contains(d, "[e2e/a100-share]") && strings.Contains(d, "alternatives on pools alt-h100, alt-a100"),
			"decision " + q.Annotations[record.AnnotationDecision]
	})
}

// altPoolNode runs the DRA agent for a kwok node of one GPU and labels the
// node as an operator would: its pool, its product, DRA mode.
func altPoolNode(t *testing.T, ctx context.Context, name, pool, product string, gpus agent.NVML) {
	t.Helper()
	draNode(t, ctx, name, pool, gpus, 1)
	node := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(node.DeepCopy())
	node.Labels[inventory.LabelPool] = pool
	node.Labels[inventory.LabelProduct] = product
	node.Labels[allocator.LabelNodeMode] = allocator.NodeModeDRA
	if err := env.Client.Patch(ctx, node, patch); err != nil {
		t.Fatal(err)
	}
}

// altPod is a pod of ns asking for GPU memory as a user writes it.
func altPod(ns, name, size string) *corev1.Pod {
	return gpuPod(ns, name, map[string]string{"gpuadmit.io/gpu-memory": size})
}

// podRequest is the node a pod is bound to and the request of its claim
// the scheduler allocated ("gpu/mig0": its first alternative).
func podRequest(t *testing.T, ctx context.Context, p *corev1.Pod) (node, request string) {
	t.Helper()
	got := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.ResourceClaimStatuses) != 1 || got.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
		t.Fatalf("pod %s has claims %v, want one", p.Name, got.Status.ResourceClaimStatuses)
	}
	c := &resourceapi.ResourceClaim{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: *got.Status.ResourceClaimStatuses[0].ResourceClaimName}, c); err != nil {
		t.Fatal(err)
	}
	if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 {
		t.Fatalf("claim %s is not allocated one device: %+v", c.Name, c.Status.Allocation)
	}
	return got.Spec.NodeName, c.Status.Allocation.Devices.Results[0].Request
}

// create creates pods (failing the test on an error) and deletes them when it ends.
func create(t *testing.T, ctx context.Context, pods ...*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatalf("create %s: %v", p.Name, err)
		}
		t.Cleanup(func() { deleteAll(context.Background(), p.Namespace, p) })
	}
}

// TestAlternativesFollowFreeCapacityUnderTheStockScheduler: three pods the
// webhook writes alike (one template), that accept a 1g.10gb slice of an
// H100, else a share of an A100. The first gets the H100's one slice; the
// second, while it is taken, the A100 share; once the first is gone, the
// third gets the slice again. The webhook's policy and inventory do not
// change in between: the scheduler decides, on its own view of the claims.
func TestAlternativesFollowFreeCapacityUnderTheStockScheduler(t *testing.T) {
	ctx := context.Background()
	useAlternatives(t)
	makeNamespaces(t, ctx, "alt-order")
	altNodes(t, ctx, "alt-order", "order")
	first, second, third := altPod("alt-order", "first", "8Gi"), altPod("alt-order", "second", "8Gi"), altPod("alt-order", "third", "8Gi")

	create(t, ctx, first)
	waitState(t, ctx, first, "node alt-h100-order")
	if _, req := podRequest(t, ctx, first); req != "gpu/mig0" {
		t.Errorf("first: allocated %s, want gpu/mig0 (the H100 slice)", req)
	}
	create(t, ctx, second)
	waitState(t, ctx, second, "node alt-a100-order")
	if _, req := podRequest(t, ctx, second); req != "gpu/shared1" {
		t.Errorf("second: allocated %s, want gpu/shared1 (the A100 share)", req)
	}
	// The slice is free once the first pod's claim is gone (the
	// resourceclaim controller deletes it after the pod): a pod created
	// before that would find the slice taken and rightly get the share.
	got := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(first), got); err != nil {
		t.Fatal(err)
	}
	claimKey := client.ObjectKey{Namespace: first.Namespace, Name: *got.Status.ResourceClaimStatuses[0].ResourceClaimName}
	if err := env.Client.Delete(ctx, first, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first pod's claim to go", time.Minute, func() (bool, string) {
		err := env.Client.Get(ctx, claimKey, &resourceapi.ResourceClaim{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get %s: %v", claimKey.Name, err)
	})
	create(t, ctx, third)
	waitState(t, ctx, third, "node alt-h100-order")
	if _, req := podRequest(t, ctx, third); req != "gpu/mig0" {
		t.Errorf("third: allocated %s, want gpu/mig0 (the H100 slice, free again)", req)
	}
	templates := map[string]bool{}
	for _, p := range []*corev1.Pod{second, third} {
		got := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
			t.Fatal(err)
		}
		templates[*got.Spec.ResourceClaims[0].ResourceClaimTemplateName] = true
		if len(got.Spec.NodeSelector) != 0 {
			t.Errorf("%s is pinned: nodeSelector %v", p.Name, got.Spec.NodeSelector)
		}
	}
	if len(templates) != 1 {
		t.Errorf("pods written alike name templates %v, want one", templates)
	}
}

// TestAlternativesThatFitNowhereStayPending: with the H100 slice taken and
// 36 GiB of the A100's 40 held by a pod pinned there (it fits no slice, so
// it is written on one pool, as before), an 8 GiB pod fits neither
// alternative: it stays Pending, and the scheduler says why.
func TestAlternativesThatFitNowhereStayPending(t *testing.T) {
	ctx := context.Background()
	useAlternatives(t)
	makeNamespaces(t, ctx, "alt-pending")
	altNodes(t, ctx, "alt-pending", "pending")
	slice, big, nowhere := altPod("alt-pending", "slice", "8Gi"), altPod("alt-pending", "big", "36Gi"), altPod("alt-pending", "nowhere", "8Gi")
	create(t, ctx, slice)
	waitState(t, ctx, slice, "node alt-h100-pending")
	create(t, ctx, big)
	waitState(t, ctx, big, "node alt-a100-pending")
	if got := readPodIn(t, ctx, big); got.Spec.NodeSelector[inventory.LabelPool] != "alt-a100" {
		t.Errorf("a pod one pool can serve has nodeSelector %v, want pool alt-a100 as before", got.Spec.NodeSelector)
	}
	create(t, ctx, nowhere)
	waitState(t, ctx, nowhere, "unschedulable")
	got := readPodIn(t, ctx, nowhere)
	for _, c := range got.Status.Conditions {
		if c.Type == corev1.PodScheduled && !strings.Contains(c.Message, "claim") {
			t.Errorf("the scheduler's reason %q does not name the claims", c.Message)
		}
	}
}

// TestAlternativesQuotaChargesTheLargest: each pod is charged its largest
// alternative, the H100 slice's 9984 MiB, whichever it gets: a 25000 MiB
// quota admits two 8 GiB pods, not three (3 × 8192 MiB would fit), and
// both run, one on each pool.
func TestAlternativesQuotaChargesTheLargest(t *testing.T) {
	ctx := context.Background()
	makeNamespaces(t, ctx, "alt-quota")
	useAlternatives(t)
	quotaReady(t, ctx, "alt-quota", 25000)
	altNodes(t, ctx, "alt-quota", "quota")
	pods := []*corev1.Pod{altPod("alt-quota", "one", "8Gi"), altPod("alt-quota", "two", "8Gi")}
	create(t, ctx, pods...)
	if err := env.Client.Create(ctx, altPod("alt-quota", "three", "8Gi")); !isQuotaDenial(err) {
		t.Errorf("a third pod: err = %v, want a quota denial", err)
	}
	if u := usedMiB(t, ctx, "alt-quota"); u != 2*9984 {
		t.Errorf("used %d MiB, want %d", u, 2*9984)
	}
	nodes := map[string]bool{}
	for _, p := range pods {
		nodes[scheduledNode(t, ctx, p)] = true
	}
	if !nodes["alt-h100-quota"] || !nodes["alt-a100-quota"] {
		t.Errorf("bound on %v, want one pod on each pool", nodes)
	}
	got := readPodIn(t, ctx, pods[0])
	if _, ok := got.Annotations[claim.AnnotationAlternatives]; !ok {
		t.Errorf("pod %s has no alternatives: %s", got.Name, got.Annotations[record.AnnotationDecision])
	}
	for r := range got.Spec.Containers[0].Resources.Requests {
		if inventory.IsAccountingResource(string(r)) && r != inventory.ResourceMemoryMiB {
			t.Errorf("pod %s requests %s, which would pin it to a model", got.Name, r)
		}
	}
}

func readPodIn(t *testing.T, ctx context.Context, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	got := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
		t.Fatal(fmt.Errorf("read %s: %w", p.Name, err))
	}
	return got
}

// TestAlternativesUnderGPUAdmitScheduler: where gpuadmit-scheduler owns
// both pools, a ReplicaSet's pod gets it, its record names both pools (the
// handover counts it as waiting on each), and gpuadmit-scheduler, whose
// plugin lets it through only while it owns both, binds it, the claim
// allocated from one of its alternatives.
func TestAlternativesUnderGPUAdmitScheduler(t *testing.T) {
	useGPUAdmitScheduler(t)
	ctx := context.Background()
	makeNamespaces(t, ctx, "alt-owned")
	useAlternatives(t)
	altNodes(t, ctx, "alt-owned", "owned")
	waitGivenTo(t, ctx, "alt-owned", nil, gpuadmitScheduler)
	labels := map[string]string{"gate": "alt-owned"}
	tmpl := altPod("alt-owned", "", "8Gi")
	tmpl.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "alt-owned", Name: "alt-owned"}, Spec: appsv1.ReplicaSetSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: tmpl.Spec},
	}}
	if err := env.Client.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), rs, client.PropagationPolicy(metav1.DeletePropagationBackground))
		for _, p := range listPods(t, context.Background(), rs) {
			_ = env.Client.Delete(context.Background(), &p, client.GracePeriodSeconds(0))
		}
	})
	p := replicaSetPods(t, ctx, rs, 1)[0]
	if p.Spec.SchedulerName != gpuadmitScheduler {
		t.Errorf("spec.schedulerName %q, want %s", p.Spec.SchedulerName, gpuadmitScheduler)
	}
	if pools := mutate.PoolsOf(p); strings.Join(pools, ",") != "alt-h100,alt-a100" {
		t.Errorf("the record names pools %v, want alt-h100 and alt-a100: %s", pools, p.Annotations[record.AnnotationDecision])
	}
	node := scheduledNode(t, ctx, p)
	_, req := podRequest(t, ctx, p)
	if !(node == "alt-h100-owned" && req == "gpu/mig0" || node == "alt-a100-owned" && req == "gpu/shared1") {
		t.Errorf("bound on %s with %s allocated, want the H100 slice or the A100 share", node, req)
	}
	t.Logf("gpuadmit-scheduler bound the pod on %s, allocating %s", node, req)
}
