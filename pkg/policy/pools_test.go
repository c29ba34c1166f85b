package policy

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuadmit/gpuadmit/pkg/intent"
)

// TestPreparedPoolsDecideAlike: converting the pools once must not change a decision.
func TestPreparedPoolsDecideAlike(t *testing.T) {
	e := NewEngine(Options{})
	if _, err := e.Load(context.Background(), Embedded()); err != nil {
		t.Fatal(err)
	}
	pools := []map[string]any{
		{"name": "h100", "model": "H100-80GB", "mode": "mig-mixed", "gpuMemoryMiB": 81559, "memorySlices": 8, "taints": []any{},
			"profiles": []map[string]any{{"name": "1g.10gb", "memoryMiB": 9984, "memorySlices": 1}}},
		{"name": "t4", "model": "T4", "mode": "shared", "gpuMemoryMiB": 15360, "taints": []any{}},
	}
	in := Input{
		Operation:  "CREATE",
		Namespace:  Namespace{Name: "ns", Labels: map[string]string{}},
		Containers: []intent.Request{{Container: "a", Kind: intent.App, Form: intent.Memory, Count: 1, MemoryMiB: 3000}},
		Pools:      pools,
		Quota:      map[string]any{},
	}
	raw, err := e.Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if in.Pools, err = PreparePools(pools); err != nil {
		t.Fatal(err)
	}
	prepared, err := e.Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw.Placement["a"]) != 2 {
		t.Fatalf("raw decision placed a on %d pools, want both", len(raw.Placement["a"]))
	}
	if diff := cmp.Diff(raw, prepared); diff != "" {
		t.Errorf("decision with prepared pools (-raw +prepared):\n%s", diff)
	}
}
