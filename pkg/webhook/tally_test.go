package webhook

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// The tally follows a pod from its pool's pending sum to its node's, and
// forgets it when it finishes or is deleted.
func TestTallyFollowsAPod(t *testing.T) {
	tl := newTally()
	p := holding("p", "", "", corev1.PodPending)
	tl.set(p)
	if diff := cmp.Diff(map[string]int64{slice: 1, "gpuadmit.io/gpu-memory-mib": 9984}, tl.get(pendingPrefix+migPool)); diff != "" {
		t.Errorf("pending (-want +got):\n%s", diff)
	}
	bound := p.DeepCopy()
	bound.Spec.NodeName = "h100-0"
	tl.set(bound)
	if got := tl.get(pendingPrefix + migPool); got != nil {
		t.Errorf("pending after binding = %v, want nothing", got)
	}
	if got := tl.get("h100-0")[slice]; got != 1 {
		t.Errorf("node h100-0 holds %d slices, want 1", got)
	}
	done := bound.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	tl.set(done)
	if got := tl.get("h100-0"); got != nil {
		t.Errorf("a finished pod still holds %v", got)
	}
	tl.set(bound)
	tl.remove(bound)
	if got := tl.get("h100-0"); got != nil {
		t.Errorf("a deleted pod still holds %v", got)
	}
}
