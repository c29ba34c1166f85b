package mutate

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	jsonpatchapply "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/decide"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

var (
	key1 = []byte("0123456789abcdef0123456789abcdef-key-one")
	key2 = []byte("0123456789abcdef0123456789abcdef-key-two")
	key3 = []byte("0123456789abcdef0123456789abcdef-key-three")
)

// keyed decides with the default policies on nodes, sealing with keys.
func keyed(eval decide.Evaluator, keys record.KeySet, nodes ...corev1.Node) *Mutator {
	inv := StaticInventory{Inv: inventory.Build(nodes, allocator.Default())}
	return NewMutator(eval, inv, MutatorOptions{RecordKeys: keys})
}

// tweakEval answers like the default policies, changed by tweak, under revision rev.
type tweakEval struct {
	rev   string
	tweak func(*policy.Decision)
}

func (e tweakEval) Evaluate(ctx context.Context, in policy.Input) (policy.Decision, error) {
	d, err := defaultEngine.Evaluate(ctx, in)
	d.Revision = e.rev
	if e.tweak != nil {
		e.tweak(&d)
	}
	return d, err
}

// t4Named is t4Shared in a pool an operator named.
var t4Named = func() corev1.Node {
	n := *t4Shared.DeepCopy()
	n.Labels[inventory.LabelPool] = "team-t4"
	return n
}()

// extras is a policy that also writes a toleration, a priority class and a label.
var extras = tweakEval{rev: "git-old", tweak: func(d *policy.Decision) {
	d.Tolerations = append(d.Tolerations, corev1.Toleration{Key: "team", Value: "a", Effect: corev1.TaintEffectNoSchedule})
	d.PriorityClassName = "gpuadmit-inference"
	d.Labels = map[string]string{"gpuadmit.io/pool-class": "mig"}
}}

var newPriority = tweakEval{rev: "git-new", tweak: func(d *policy.Decision) { d.PriorityClassName = "gpuadmit-batch" }}

// memPod asks for a 3000 MiB share: a MIG slice on h100Mixed, a share on t4Shared.
func memPod() *corev1.Pod { return pod("p", map[string]string{"nvidia.com/gpumem": "3000"}) }

// TestSealedPodComesBackUnchanged: a pod gpuadmit admitted comes back
// within the seal window (the API server's reinvocation after a later
// webhook) after the nodes or the policy changed. Deciding again would now
// write something else; the sealed record lets it pass unchanged, while
// without a key it is still re-decided and denied, as before seals.
// (Past the window it is decided again: TestPodSealHoldsOnlyInTheReinvocationWindow.)
func TestSealedPodComesBackUnchanged(t *testing.T) {
	keys := record.KeySet{Current: key1}
	tests := map[string]struct {
		first, then *Mutator
		// unsealed decides again without a key, as gpuadmit did before seals.
		unsealed *Mutator
	}{
		"its pool is gone": {
			first: keyed(defaultEngine, keys, h100Mixed, t4Shared), then: keyed(defaultEngine, keys, t4Shared),
			unsealed: keyed(defaultEngine, record.KeySet{}, t4Shared)},
		"an operator named its pool": {
			first: keyed(defaultEngine, keys, t4Shared), then: keyed(defaultEngine, keys, t4Named),
			unsealed: keyed(defaultEngine, record.KeySet{}, t4Named)},
		"the policy revision changed the priority": {
			first: keyed(defaultEngine, keys, h100Mixed), then: keyed(newPriority, keys, h100Mixed),
			unsealed: keyed(newPriority, record.KeySet{}, h100Mixed)},
		"rotated: sealed under the previous key": {
			first: keyed(defaultEngine, keys, h100Mixed, t4Shared), then: keyed(defaultEngine, record.KeySet{Current: key2, Previous: key1}, t4Shared),
			unsealed: keyed(defaultEngine, record.KeySet{}, t4Shared)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			admitted := mustMutate(t, tc.first, memPod()).Pod
			if admitted.Annotations[record.AnnotationMAC] == "" || admitted.Annotations[record.AnnotationWritten] == "" {
				t.Fatalf("admitted pod has no seal: %v", admitted.Annotations)
			}
			res := mustMutate(t, tc.then, admitted.DeepCopy())
			if !res.Allowed || len(res.Patch) != 0 {
				t.Fatalf("allowed %v, patch %v, message %q; want allowed unchanged", res.Allowed, res.Patch, res.Message)
			}
			if diff := cmp.Diff(admitted, res.Pod); diff != "" {
				t.Errorf("pod changed (-admitted +result):\n%s", diff)
			}
			// The case is real: deciding again, as without a key, denies it.
			if again := mustMutate(t, tc.unsealed, admitted.DeepCopy()); again.Allowed {
				t.Errorf("deciding again allowed it (patch %v): the case does not test the seal", again.Patch)
			}
		})
	}
}

// TestSealedRecordIsTiedToThePod: a valid MAC vouches for the record, not
// for edits of the pod: a pod that differs from what gpuadmit wrote is
// denied, even where deciding again is not possible any more.
func TestSealedRecordIsTiedToThePod(t *testing.T) {
	keys := record.KeySet{Current: key1}
	admitted := mustMutate(t, keyed(extras, keys, h100Mixed), memPod()).Pod
	then := keyed(extras, keys, t4Shared) // the pool is gone: no re-decision would pass either
	tests := map[string]struct {
		edit func(p *corev1.Pod)
		want string
	}{
		"a larger GPU resource": {func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = list(map[string]string{"nvidia.com/mig-7g.80gb": "1"})
		}, "spec.containers[0].resources.limits[nvidia.com/mig-7g.80gb]"},
		"a larger request only": {func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests["nvidia.com/mig-1g.10gb"] = *resourceQuantity(2)
		}, "spec.containers[0].resources.requests[nvidia.com/mig-1g.10gb]"},
		"GPU in another container": {func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "side", Resources: corev1.ResourceRequirements{
				Limits: list(map[string]string{"nvidia.com/gpu": "8"})}})
		}, "spec.containers[1].resources.limits[nvidia.com/gpu]"},
		"gpuadmit's class by its implicit name": {func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits["deviceclass.resource.kubernetes.io/gpu.gpuadmit.io"] = *resourceQuantity(8)
		}, "spec.containers[0].resources.limits[deviceclass.resource.kubernetes.io/gpu.gpuadmit.io]"},
		"a MIG class by its implicit name, in another container": {func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "side", Resources: corev1.ResourceRequirements{
				Requests: list(map[string]string{"deviceclass.resource.kubernetes.io/mig-7g.80gb.gpuadmit.io": "1"})}})
		}, "spec.containers[1].resources.requests[deviceclass.resource.kubernetes.io/mig-7g.80gb.gpuadmit.io]"},
		"a changed nodeSelector": {func(p *corev1.Pod) {
			p.Spec.NodeSelector[inventory.LabelProduct] = "Tesla-T4"
		}, "spec.nodeSelector[" + inventory.LabelProduct + "]"},
		"a removed toleration": {func(p *corev1.Pod) {
			p.Spec.Tolerations = nil
		}, "spec.tolerations[key=team]"},
		"a removed label": {func(p *corev1.Pod) {
			delete(p.Labels, "gpuadmit.io/pool-class")
		}, "metadata.labels[gpuadmit.io/pool-class]"},
		"another priority class": {func(p *corev1.Pod) {
			p.Spec.PriorityClassName = "system-node-critical"
		}, "spec.priorityClassName"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := admitted.DeepCopy()
			tc.edit(p)
			res := mustMutate(t, then, p)
			if res.Allowed {
				t.Fatal("allowed an edited pod under a valid seal")
			}
			for _, w := range []string{"the record is sealed", tc.want} {
				if !strings.Contains(res.Message, w) {
					t.Errorf("message %q does not contain %q", res.Message, w)
				}
			}
		})
	}
}

// TestUnverifiedSealsDecideAgain: a seal this replica cannot verify (an
// unknown key, another namespace, an edited record) counts for nothing:
// the pod is decided again, passes where that agrees (its seal replaced by
// this replica's), and is denied as forged where not.
func TestUnverifiedSealsDecideAgain(t *testing.T) {
	admitted := mustMutate(t, keyed(defaultEngine, record.KeySet{Current: key1}, h100Mixed, t4Shared), memPod()).Pod
	tests := map[string]struct {
		pod    func() *corev1.Pod
		then   *Mutator
		allow  bool
		reason string
	}{
		"an unknown key, same nodes": {pod: admitted.DeepCopy, then: keyed(defaultEngine, record.KeySet{Current: key3}, h100Mixed, t4Shared), allow: true},
		"an unknown key, the pool gone": {pod: admitted.DeepCopy, then: keyed(defaultEngine, record.KeySet{Current: key3}, t4Shared),
			reason: "which this replica does not hold"},
		"another namespace": {pod: func() *corev1.Pod {
			p := admitted.DeepCopy()
			p.Namespace = "other"
			return p
		}, then: keyed(defaultEngine, record.KeySet{Current: key1}, t4Shared), reason: "does not match the record"},
		"a record edited to match an edit": {pod: func() *corev1.Pod {
			p := admitted.DeepCopy()
			p.Spec.NodeSelector["zone"] = "a"
			p.Annotations[record.AnnotationWritten] = strings.Replace(p.Annotations[record.AnnotationWritten], `"sel":{`, `"sel":{"zone":"a",`, 1)
			delete(p.Spec.NodeSelector, inventory.LabelProduct)
			return p
		}, then: keyed(defaultEngine, record.KeySet{Current: key1}, h100Mixed, t4Shared), reason: "does not match the record"},
		"no MAC at all": {pod: func() *corev1.Pod {
			p := admitted.DeepCopy()
			delete(p.Annotations, record.AnnotationMAC)
			return p
		}, then: keyed(defaultEngine, record.KeySet{Current: key1}, t4Shared), reason: "gpuadmit.io/mac is missing"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := mustMutate(t, tc.then, tc.pod())
			if res.Allowed != tc.allow {
				t.Fatalf("allowed %v, message %q; want %v", res.Allowed, res.Message, tc.allow)
			}
			if !tc.allow {
				for _, w := range []string{"gpuadmit's", tc.reason} {
					if !strings.Contains(res.Message, w) {
						t.Errorf("message %q does not contain %q", res.Message, w)
					}
				}
				return
			}
			checkResealed(t, tc.then, res)
		})
	}
}

// checkResealed checks that an allowed re-decision changes only the seal,
// and that the new seal verifies on this replica.
func checkResealed(t *testing.T, m *Mutator, res Result) {
	t.Helper()
	for _, op := range res.Patch {
		if !strings.HasPrefix(op.Path, "/metadata/annotations/gpuadmit.io~1") {
			t.Errorf("patch touches %s; want only the seal replaced", op.Path)
		}
	}
	if again := mustMutate(t, m, res.Pod); !again.Allowed || len(again.Patch) != 0 || !strings.Contains(again.Explanation, "sealed record verifies") {
		t.Errorf("the resealed pod: allowed %v, patch %v, explanation %q; want it verified by its seal", again.Allowed, again.Patch, again.Explanation)
	}
}

// TestHandlerReinvocationAfterANodeChange drives the handler with the
// hami-create review, then with the pod it admitted, as the API server
// sends it again when a later webhook changed the pod (reinvocation), after
// the nodes of the chosen pool went away in between. Sealed, the pod passes
// unchanged; unsealed (no key, as before seals) it is denied as forged.
func TestHandlerReinvocationAfterANodeChange(t *testing.T) {
	req := requestOf(t, reviewFiles(t)["hami-create"])
	nodes := exampleNodes(t)
	for name, tc := range map[string]struct {
		keys      record.KeySet
		wantAllow bool
	}{
		"sealed":           {keys: record.KeySet{Current: key1}, wantAllow: true},
		"no key, deciding": {keys: record.KeySet{}},
	} {
		t.Run(name, func(t *testing.T) {
			first := keyedHandler(t, tc.keys, nodes)
			resp := first.Handle(context.Background(), req)
			if !resp.Allowed || len(patchOps(t, resp)) == 0 {
				t.Fatalf("first call: allowed %v, %d patches, %v; want a mutation", resp.Allowed, len(patchOps(t, resp)), resp.Result)
			}
			again := req
			again.Object.Raw = patched(t, req.Object.Raw, resp.Patch)
			var admitted corev1.Pod
			if err := json.Unmarshal(again.Object.Raw, &admitted); err != nil {
				t.Fatal(err)
			}
			then := keyedHandler(t, tc.keys, withoutPool(nodes, admitted.Spec.NodeSelector))
			resp = then.Handle(context.Background(), again)
			if resp.Allowed != tc.wantAllow || len(patchOps(t, resp)) != 0 {
				t.Errorf("reinvocation: allowed %v, patches %s, %v; want allowed %v with no patch", resp.Allowed, resp.Patch, resp.Result, tc.wantAllow)
			}
		})
	}
}

func keyedHandler(t *testing.T, keys record.KeySet, nodes []corev1.Node) *Handler {
	m := NewMutator(defaultEngine, StaticInventory{Inv: inventory.Build(nodes, allocator.Default())}, MutatorOptions{RecordKeys: keys})
	return NewHandler(m, teamA(t), podScheme(), HandlerOptions{})
}

func exampleNodes(t *testing.T) []corev1.Node {
	return readNodes(t, "../../examples/nodes.yaml")
}

// withoutPool drops the nodes that sel selects.
func withoutPool(nodes []corev1.Node, sel map[string]string) []corev1.Node {
	var out []corev1.Node
	for _, n := range nodes {
		if !labels.SelectorFromSet(sel).Matches(labels.Set(n.Labels)) {
			out = append(out, n)
		}
	}
	return out
}

// patched applies an admission response's patch (its Patch bytes) to a raw object.
func patched(t *testing.T, raw, patch []byte) []byte {
	t.Helper()
	p, err := jsonpatchapply.DecodePatch(patch)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Apply(raw)
	if err != nil {
		t.Fatalf("the patch does not apply: %v\n%s", err, patch)
	}
	return out
}
