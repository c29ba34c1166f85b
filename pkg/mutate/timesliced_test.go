package mutate

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/decide"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// timeSlicedMutator decides over examples/nodes-time-sliced.yaml: an L4
// pool time-sliced 4 ways (nvidia.com/gpu), an A10 pool time-sliced 2 ways
// (nvidia.com/gpu.shared) and one whole L4.
func timeSlicedMutator(t *testing.T, eval decide.Evaluator) *Mutator {
	t.Helper()
	nodes := readNodes(t, "../../examples/nodes-time-sliced.yaml")
	return NewMutator(eval, StaticInventory{Inv: inventory.Build(nodes, allocator.Default())}, MutatorOptions{})
}

// TestTimeSlicedReplicas: nvidia.com/gpu: N takes N replicas where no whole
// GPU is left to take, a memory request may take one with a warning that its
// memory is not isolated, and a MIG profile never does. gpuadmit.io/backend:
// time-sliced and nvidia.com/gpu.shared take replicas even where a whole GPU
// is free, written as the pool serves them.
func TestTimeSlicedReplicas(t *testing.T) {
	m := timeSlicedMutator(t, defaultEngine)
	l4 := map[string]string{"gpuadmit.io/model": "L4"}
	hint := map[string]string{"gpuadmit.io/backend": "time-sliced"}
	tests := map[string]struct {
		limits    map[string]string
		ann       map[string]string
		wantPool  string
		wantGPU   map[string]string
		wantWarns int // warnings that say the memory is not isolated
	}{
		"one GPU takes the whole L4 first": {limits: map[string]string{"nvidia.com/gpu": "1"}, wantPool: "l4-whole",
			wantGPU: map[string]string{"nvidia.com/gpu": "1"}},
		"two GPUs take two replicas of the smaller GPU, renamed": {limits: map[string]string{"nvidia.com/gpu": "2"}, wantPool: "a10-time-sliced",
			wantGPU: map[string]string{"nvidia.com/gpu.shared": "2"}, wantWarns: 1},
		"a model hint takes L4 replicas as nvidia.com/gpu": {limits: map[string]string{"nvidia.com/gpu": "3"}, ann: l4, wantPool: "l4-time-sliced",
			wantGPU: map[string]string{"nvidia.com/gpu": "3"}, wantWarns: 1},
		"8 GiB takes a replica of the smallest GPU that holds it": {limits: map[string]string{"gpuadmit.io/gpu-memory": "8Gi"},
			wantPool: "a10-time-sliced", wantGPU: map[string]string{"nvidia.com/gpu.shared": "1"}, wantWarns: 1},
		"the time-sliced hint takes a replica though a whole L4 is free": {limits: map[string]string{"nvidia.com/gpu": "1"}, ann: hint,
			wantPool: "a10-time-sliced", wantGPU: map[string]string{"nvidia.com/gpu.shared": "1"}, wantWarns: 1},
		"the time-sliced hint gives half a GPU a replica": {limits: map[string]string{"gpuadmit.io/gpu": "500m"}, ann: hint,
			wantPool: "a10-time-sliced", wantGPU: map[string]string{"nvidia.com/gpu.shared": "1"}, wantWarns: 1},
		"nvidia.com/gpu.shared takes a replica though a whole L4 is free": {limits: map[string]string{"nvidia.com/gpu.shared": "1"},
			wantPool: "a10-time-sliced", wantGPU: map[string]string{"nvidia.com/gpu.shared": "1"}, wantWarns: 1},
		"nvidia.com/gpu.shared on L4s is written as nvidia.com/gpu": {limits: map[string]string{"nvidia.com/gpu.shared": "2"}, ann: l4,
			wantPool: "l4-time-sliced", wantGPU: map[string]string{"nvidia.com/gpu": "2"}, wantWarns: 1},
		"nvidia.com/gpu.shared with the time-sliced hint": {limits: map[string]string{"nvidia.com/gpu.shared": "4"}, ann: hint,
			wantPool: "a10-time-sliced", wantGPU: map[string]string{"nvidia.com/gpu.shared": "4"}, wantWarns: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := pod("p", tc.limits)
			p.Annotations = tc.ann
			res := mustMutate(t, m, p)
			if !res.Allowed {
				t.Fatalf("denied: %s", res.Message)
			}
			if got := res.Pod.Annotations[record.AnnotationDecision]; !strings.Contains(got, "pool "+tc.wantPool+";") {
				t.Errorf("decision %q, want pool %s", got, tc.wantPool)
			}
			if diff := cmp.Diff(tc.wantGPU, gpuResources(res.Pod.Spec.Containers[0])); diff != "" {
				t.Errorf("GPU resources (-want +got):\n%s", diff)
			}
			n := 0
			for _, w := range res.Warnings {
				if strings.Contains(w, "not isolated") && strings.Contains(w, `container "a"`) {
					n++
				}
			}
			if n != tc.wantWarns {
				t.Errorf("%d warnings about isolation, want %d: %q", n, tc.wantWarns, res.Warnings)
			}
			again := mustMutate(t, m, res.Pod)
			if !again.Allowed || len(again.Patch) > 0 {
				t.Errorf("admitting the mutated pod again: allowed %v, %s, patch %v", again.Allowed, again.Message, again.Patch)
			}
		})
	}
}

// TestTimeSlicedAccounting: a replica counts as its GPU's memory over the
// replicas, what the node advertises per replica.
func TestTimeSlicedAccounting(t *testing.T) {
	res := mustMutate(t, timeSlicedMutator(t, defaultEngine), pod("p", map[string]string{"nvidia.com/gpu": "2"}))
	want := map[string]string{"nvidia.com/gpu.shared": "2", "gpuadmit.io/gpu-memory-mib": "23028", "gpuadmit.io/a10-mib": "23028"}
	if diff := cmp.Diff(want, accountingResources(res.Pod.Spec.Containers[0])); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
}

// neverOnReplicas is the default policy with memoryOnTimeSlicedGPUs: never.
type neverOnReplicas struct{ e *policy.Engine }

func (n neverOnReplicas) Evaluate(ctx context.Context, in policy.Input) (policy.Decision, error) {
	d, err := n.e.Evaluate(ctx, in)
	for c, cands := range d.Placement {
		var keep []policy.Candidate
		for _, cand := range cands {
			if cand.Backend != policy.BackendTimeSliced || in.Containers[0].Form == "whole" {
				keep = append(keep, cand)
			}
		}
		d.Placement[c] = keep
	}
	return d, err
}

// TestTimeSlicedNeverForMemory: without a time-sliced candidate a memory
// request goes to a whole GPU, and the "no placement" reasons would name
// the pool kind.
func TestTimeSlicedNeverForMemory(t *testing.T) {
	res := mustMutate(t, timeSlicedMutator(t, neverOnReplicas{defaultEngine}), pod("p", map[string]string{"gpuadmit.io/gpu-memory": "8Gi"}))
	if got := res.Pod.Annotations[record.AnnotationDecision]; !res.Allowed || !strings.Contains(got, "pool l4-whole;") {
		t.Errorf("allowed %v, decision %q; want the whole L4", res.Allowed, got)
	}
}

// TestTimeSlicedHintUnderNever: with memoryOnTimeSlicedGPUs: never a
// request sized in memory gets no replica, even where gpuadmit.io/backend:
// time-sliced or another container's nvidia.com/gpu.shared sends the pod to
// time-sliced GPUs; the hints narrow the policy's choice, so the pod is
// denied with what sent it there, the data and what to write instead.
func TestTimeSlicedHintUnderNever(t *testing.T) {
	m := timeSlicedMutator(t, engineWithData(t, "memoryOnTimeSlicedGPUs: warn", "memoryOnTimeSlicedGPUs: never"))
	mem := map[string]string{"gpuadmit.io/gpu-memory": "8Gi"}
	hinted := pod("p", mem)
	hinted.Annotations = map[string]string{"gpuadmit.io/backend": "time-sliced"}
	tests := map[string]struct {
		pod   *corev1.Pod
		wants []string
	}{
		"the hint": {pod: hinted, wants: []string{`gpuadmit.io/backend is "time-sliced"`, "remove gpuadmit.io/backend"}},
		"nvidia.com/gpu.shared beside it": {pod: pod("p", mem, map[string]string{"nvidia.com/gpu.shared": "1"}), wants: []string{
			`container "b" asks for nvidia.com/gpu.shared, which puts the whole pod on a time-sliced pool`, "in a pod without nvidia.com/gpu.shared"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := mustMutate(t, m, tc.pod)
			if res.Allowed {
				t.Fatalf("allowed with decision %q, want denied", res.Pod.Annotations[record.AnnotationDecision])
			}
			wants := append([]string{`container "a" asks for GPU sized in memory or as a fraction (gpuadmit.io/gpu-memory=8Gi)`,
				"memoryOnTimeSlicedGPUs: never", "nvidia.com/gpu.shared: N or nvidia.com/gpu: N"}, tc.wants...)
			for _, want := range wants {
				if !strings.Contains(res.Message, want) {
					t.Errorf("message %q does not say %q", res.Message, want)
				}
			}
		})
	}
}

// TestTimeSlicedSharedResource: examples/pods/nvidia-shared.yaml, a replica
// asked for as nvidia.com/gpu.shared, is written as any pod is: the
// resource the pool serves with the accounting of a replica, the pool's
// nodeSelector, the class's PriorityClass and gpuadmit's label. Admitting
// the result again changes nothing, sealed or decided again, and a sealed
// pod whose nvidia.com/gpu.shared was changed is refused.
func TestTimeSlicedSharedResource(t *testing.T) {
	inv := StaticInventory{Inv: inventory.Build(readNodes(t, "../../examples/nodes-time-sliced.yaml"), allocator.Default())}
	ns := &corev1.Namespace{}
	readYAML(t, "../../examples/namespace.yaml", ns)
	for name, keys := range map[string]record.KeySet{"decided again": {}, "sealed": {Current: key1}} {
		t.Run(name, func(t *testing.T) {
			m := NewMutator(defaultEngine, inv, MutatorOptions{RecordKeys: keys})
			in := &corev1.Pod{}
			readYAML(t, "../../examples/pods/nvidia-shared.yaml", in)
			res, err := m.Mutate(context.Background(), Request{Pod: in, Namespace: ns})
			if err != nil || !res.Allowed {
				t.Fatalf("Mutate: err %v, allowed %v, %s", err, res.Allowed, res.Message)
			}
			out := res.Pod
			want := map[string]string{"nvidia.com/gpu.shared": "1", "gpuadmit.io/gpu-memory-mib": "11514", "gpuadmit.io/a10-mib": "11514"}
			if diff := cmp.Diff(want, accountingResources(out.Spec.Containers[0])); diff != "" {
				t.Errorf("resources (-want +got):\n%s", diff)
			}
			got := map[string]string{"nodeSelector": decide.FormatSelector(out.Spec.NodeSelector), "priorityClassName": out.Spec.PriorityClassName,
				"managed": out.Labels[LabelManaged], "decision": out.Annotations[record.AnnotationDecision]}
			wantMeta := map[string]string{"nodeSelector": "nvidia.com/gpu.product=NVIDIA-A10", "priorityClassName": "gpuadmit-inference", "managed": "true",
				"decision": "serve: 1 time-sliced replica -> nvidia.com/gpu.shared=1 (11514 MiB) [default/whole-to-time-sliced]; pool a10-time-sliced; revision " + res.Revision}
			if diff := cmp.Diff(wantMeta, got); diff != "" {
				t.Errorf("pod (-want +got):\n%s", diff)
			}
			again, err := m.Mutate(context.Background(), Request{Pod: out, Namespace: ns})
			if err != nil || !again.Allowed || len(again.Patch) > 0 {
				t.Errorf("admitting the mutated pod again: err %v, allowed %v, %s, patch %v", err, again.Allowed, again.Message, again.Patch)
			}
			more := out.DeepCopy()
			more.Spec.Containers[0].Resources.Limits["nvidia.com/gpu.shared"] = resource.MustParse("2")
			more.Spec.Containers[0].Resources.Requests["nvidia.com/gpu.shared"] = resource.MustParse("2")
			if res, err := m.Mutate(context.Background(), Request{Pod: more, Namespace: ns}); err != nil || res.Allowed {
				t.Errorf("admitting the mutated pod with 2 replicas: err %v, allowed %v; want denied", err, res.Allowed)
			}
		})
	}
}

// TestTimeSlicedSharedPod: nvidia.com/gpu.shared in one container sends the
// pod to time-sliced GPUs, so its other GPU containers take replicas too
// (a pod's containers share one pool).
func TestTimeSlicedSharedPod(t *testing.T) {
	m := timeSlicedMutator(t, defaultEngine)
	res := mustMutate(t, m, pod("p", map[string]string{"nvidia.com/gpu.shared": "1"}, map[string]string{"nvidia.com/gpu": "1"}))
	if !res.Allowed {
		t.Fatalf("denied: %s", res.Message)
	}
	for i, c := range res.Pod.Spec.Containers {
		if diff := cmp.Diff(map[string]string{"nvidia.com/gpu.shared": "1"}, gpuResources(c)); diff != "" {
			t.Errorf("container %d GPU resources (-want +got):\n%s", i, diff)
		}
	}
}

// TestTimeSlicedSharedWithoutPool: where no pool is time-sliced, a pod
// asking for nvidia.com/gpu.shared is denied, saying what it asked for and,
// pool by pool, why the pool was not taken.
func TestTimeSlicedSharedWithoutPool(t *testing.T) {
	inv := exampleInventory(t)
	m := NewMutator(defaultEngine, StaticInventory{Inv: inv}, MutatorOptions{})
	res := mustMutate(t, m, pod("p", map[string]string{"nvidia.com/gpu.shared": "2"}))
	if res.Allowed {
		t.Fatalf("allowed with decision %q, want denied", res.Pod.Annotations[record.AnnotationDecision])
	}
	if want := `container "a" asks for 2 time-sliced replicas (nvidia.com/gpu.shared=2)`; !strings.Contains(res.Message, want) {
		t.Errorf("message %q does not say %q", res.Message, want)
	}
	for _, p := range inv.Pools {
		why := regexp.MustCompile(fmt.Sprintf(`pool %s: policy revision \S+ offers no candidate on it \(a %s pool`, regexp.QuoteMeta(p.Name), p.Mode))
		if !why.MatchString(res.Message) {
			t.Errorf("message %q does not say why pool %s was not taken", res.Message, p.Name)
		}
	}
}
