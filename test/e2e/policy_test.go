package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
	"github.com/gpuadmit/gpuadmit/policies"
)

// TestPolicySwap: a broken set swapped in mid-run never goes live (decisions
// keep the last good revision, readiness says why); a good new set does.
func TestPolicySwap(t *testing.T) {
	ctx := context.Background()
	before := revisionOf(t, ctx, "swap-1")
	root := filepath.Dir(policyDir)
	if err := writePolicies(filepath.Join(root, "broken"), map[string]string{"placement.rego": "package gpuadmit\nplacement[ := \n"}); err != nil {
		t.Fatal(err)
	}
	tests, _ := policies.FS.ReadFile("decision_test.rego")
	if err := writePolicies(filepath.Join(root, "v2"), map[string]string{"decision_test.rego": string(tests) + "\ntest_v2 if { true }\n"}); err != nil {
		t.Fatal(err)
	}
	defer swapPolicies(t, "v1")

	swapPolicies(t, "broken")
	waitFor(t, "broken set reported", 20*time.Second, func() (bool, string) {
		r := env.Readyz()
		return strings.Contains(r, "NOT activated") && strings.Contains(r, "placement.rego"), r
	})
	if got := revisionOf(t, ctx, "swap-2"); got != before {
		t.Errorf("decision under the broken set has revision %s, want the last good %s", got, before)
	}

	swapPolicies(t, "v2")
	waitFor(t, "new set live", 20*time.Second, func() (bool, string) {
		r := env.Readyz()
		return !strings.Contains(r, "NOT activated") && !strings.Contains(r, before), r
	})
	if got := revisionOf(t, ctx, "swap-3"); got == before {
		t.Errorf("decision after the good swap still has revision %s", got)
	}
}

// revisionOf creates a GPU pod and returns the policy revision in its record.
func revisionOf(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	p := h100Pod("team-a", name)
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	defer deleteAll(ctx, "team-a", p)
	d := p.Annotations[record.AnnotationDecision]
	i := strings.LastIndex(d, "revision ")
	if i < 0 {
		t.Fatalf("%s: no revision in decision %q", name, d)
	}
	return d[i+len("revision "):]
}
