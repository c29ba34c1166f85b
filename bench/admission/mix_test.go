package admission

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// TestTemplatePodsLookAlike: every pod of the template mix has one view for
// the policy (policy.View, what gpuadmit's memo keys on), whatever its name.
func TestTemplatePodsLookAlike(t *testing.T) {
	first := policy.View(MixTemplate.Pod(Namespace, "gpuadmit-10-r0-00000", 0))
	for i := 1; i < 3*len(shapes); i++ {
		p := MixTemplate.Pod(Namespace, fmt.Sprintf("gpuadmit-10-r0-%05d", i), i)
		if d := cmp.Diff(first, policy.View(p)); d != "" {
			t.Fatalf("template pod %d looks different to the policy (-want +got):\n%s", i, d)
		}
	}
}

// TestDistinctPodsAllDiffer: no two pods of the distinct mix have one view,
// not even two of one shape, while the shapes mix repeats its views.
func TestDistinctPodsAllDiffer(t *testing.T) {
	views := func(mix Mix, n int) map[string]int {
		out := map[string]int{}
		for i := range n {
			b, err := json.Marshal(policy.View(mix.Pod(Namespace, fmt.Sprintf("p-%05d", i), i)))
			if err != nil {
				t.Fatal(err)
			}
			out[string(b)]++
		}
		return out
	}
	n := 5 * len(shapes)
	if got := len(views(MixDistinct, n)); got != n {
		t.Errorf("distinct mix: %d different views of %d pods, want %d", got, n, n)
	}
	if got := len(views(MixShapes, n)); got != len(shapes) {
		t.Errorf("shapes mix: %d different views of %d pods, want one per shape (%d)", got, n, len(shapes))
	}
}

// TestDistinctKeepsShape: the distinct mix only adds its label; the pod asks
// for the same GPUs as the shapes mix's pod of that index.
func TestDistinctKeepsShape(t *testing.T) {
	for i := range len(shapes) {
		d, s := MixDistinct.Pod(Namespace, "p", i), MixShapes.Pod(Namespace, "p", i)
		if d.Labels[DistinctLabel] != "p" {
			t.Errorf("pod %d: labels %v, want %s=p", i, d.Labels, DistinctLabel)
		}
		delete(d.Labels, DistinctLabel)
		if diff := cmp.Diff(s, d); diff != "" {
			t.Errorf("pod %d (-shapes +distinct):\n%s", i, diff)
		}
	}
}
