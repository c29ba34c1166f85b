package mutate

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// timeSlicedMutator decides over examples/nodes-time-sliced.yaml: an L4
// pool time-sliced 4 ways (nvidia.com/gpu), an A10 pool time-sliced 2 ways
// (nvidia.com/gpu.shared) and one whole L4.
func timeSlicedMutator(t *testing.T, eval Evaluator) *Mutator {
	t.Helper()
	nodes := readNodes(t, "../../examples/nodes-time-sliced.yaml")
	return NewMutator(eval, StaticInventory{Inv: inventory.Build(nodes, allocator.Default())}, MutatorOptions{})
}

// TestTimeSlicedReplicas: nvidia.com/gpu: N takes N replicas where no whole
// GPU is left to take, a memory request may take one with a warning that its
// memory is not isolated, and a MIG profile never does. gpuadmit.io/backend:
// time-sliced takes replicas even where a whole GPU is free.
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
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := pod("p", tc.limits)
			p.Annotations = tc.ann
			res := mustMutate(t, m, p)
			if !res.Allowed {
				t.Fatalf("denied: %s", res.Message)
			}
			if got := res.Pod.Annotations[AnnotationDecision]; !strings.Contains(got, "pool "+tc.wantPool+";") {
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
	if got := res.Pod.Annotations[AnnotationDecision]; !res.Allowed || !strings.Contains(got, "pool l4-whole;") {
		t.Errorf("allowed %v, decision %q; want the whole L4", res.Allowed, got)
	}
}

// TestTimeSlicedHintUnderNever: with memoryOnTimeSlicedGPUs: never a
// request sized in memory gets no replica, gpuadmit.io/backend: time-sliced
// or not; the hint narrows the policy's choice, so the pod is denied with
// the hint, the data and what to write instead.
func TestTimeSlicedHintUnderNever(t *testing.T) {
	e := engineWithData(t, "memoryOnTimeSlicedGPUs: warn", "memoryOnTimeSlicedGPUs: never")
	p := pod("p", map[string]string{"gpuadmit.io/gpu-memory": "8Gi"})
	p.Annotations = map[string]string{"gpuadmit.io/backend": "time-sliced"}
	res := mustMutate(t, timeSlicedMutator(t, e), p)
	if res.Allowed {
		t.Fatalf("allowed with decision %q, want denied", res.Pod.Annotations[AnnotationDecision])
	}
	for _, want := range []string{`container "a" asks for GPU sized in memory or as a fraction (gpuadmit.io/gpu-memory=8Gi)`,
		`gpuadmit.io/backend is "time-sliced"`, "memoryOnTimeSlicedGPUs: never", "nvidia.com/gpu: N", "remove gpuadmit.io/backend"} {
		if !strings.Contains(res.Message, want) {
			t.Errorf("message %q does not say %q", res.Message, want)
		}
	}
}
