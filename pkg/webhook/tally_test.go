package webhook

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
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

// onNodes gives what the pods on the asked nodes hold, and nothing of other
// nodes or of pending pods, whether it walks the nodes (more sums than
// nodes) or the sums (fewer).
func TestTallyOnNodes(t *testing.T) {
	tl := newTally()
	for i, node := range []string{"h100-0", "h100-2", "a100-0"} {
		p := holding(fmt.Sprintf("p%d", i), "", "", corev1.PodPending)
		p.Spec.NodeName = node
		tl.set(p)
	}
	tl.set(holding("pending", "", "", corev1.PodPending))
	nodes := func(names ...string) []inventory.Node {
		var out []inventory.Node
		for _, n := range names {
			out = append(out, inventory.Node{Name: n})
		}
		return out
	}
	want := map[string]map[string]int64{"h100-0": tl.get("h100-0"), "h100-2": tl.get("h100-2")}
	for name, asked := range map[string][]inventory.Node{
		"fewer nodes than sums": nodes("h100-0", "h100-2"),
		"more nodes than sums":  nodes("h100-0", "h100-1", "h100-2", "h100-3", "h100-4", "h100-5"),
	} {
		if diff := cmp.Diff(want, tl.onNodes(asked)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}
