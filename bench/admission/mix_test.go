package admission

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gpuadmit/gpuadmit/pkg/intent"
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

// TestDistinctKeepsShape: the distinct mix only names its container after
// the pod, the labeled mix only adds its label; the pod asks for the same
// GPUs as the shapes mix's pod of that index (the template's, for labeled).
func TestDistinctKeepsShape(t *testing.T) {
	for i := range len(shapes) {
		d, s := MixDistinct.Pod(Namespace, "p-00001", i), MixShapes.Pod(Namespace, "p-00001", i)
		if got := d.Spec.Containers[0].Name; got != "p-00001" {
			t.Errorf("pod %d: container %q, want it named after the pod", i, got)
		}
		if errs := validation.IsDNS1123Label(d.Spec.Containers[0].Name); len(errs) > 0 {
			t.Errorf("pod %d: container name: %v", i, errs)
		}
		d.Spec.Containers[0].Name = s.Spec.Containers[0].Name
		if diff := cmp.Diff(s, d); diff != "" {
			t.Errorf("pod %d (-shapes +distinct):\n%s", i, diff)
		}
		l := MixLabeled.Pod(Namespace, "p", i)
		if l.Labels[DistinctKey] != "p" {
			t.Errorf("labeled pod %d: labels %v, want %s=p", i, l.Labels, DistinctKey)
		}
		delete(l.Labels, DistinctKey)
		if diff := cmp.Diff(MixTemplate.Pod(Namespace, "p", i), l); diff != "" {
			t.Errorf("labeled pod %d (-template +labeled):\n%s", i, diff)
		}
	}
}

// TestMixesAsTheDefaultPoliciesSeeThem: under what the embedded policies
// read of the pod (policy.PodReads) and its GPU requests and hints as the
// policy gets them (input.containers, input.hints, from intent.Read), the
// parts of gpuadmit's memo key a pod decides, every distinct pod differs
// and the labeled mix's pods are one template.
func TestMixesAsTheDefaultPoliciesSeeThem(t *testing.T) {
	set, err := policy.Compile(t.Context(), policy.Embedded())
	if err != nil {
		t.Fatal(err)
	}
	keys := func(mix Mix, n int) int {
		seen := map[string]bool{}
		for i := range n {
			pod := mix.Pod(Namespace, fmt.Sprintf("p-%05d", i), i)
			want, errs := intent.Read(pod)
			if len(errs) > 0 {
				t.Fatal(errs.ToAggregate())
			}
			b, err := json.Marshal([]any{set.Reads.KeyView(policy.View(pod)), want.Requests, want.Class, want.Backend, want.Model})
			if err != nil {
				t.Fatal(err)
			}
			seen[string(b)] = true
		}
		return len(seen)
	}
	n := 3 * len(shapes)
	if got := keys(MixDistinct, n); got != n {
		t.Errorf("distinct mix: %d different keys of %d pods, want %d", got, n, n)
	}
	if got := keys(MixLabeled, n); got != 1 {
		t.Errorf("labeled mix: %d different keys of %d pods, want 1", got, n)
	}
}
