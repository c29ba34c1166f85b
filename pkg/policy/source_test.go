package policy

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestKustomizationIsNoData: the default set's directory holds the
// kustomization.yaml that makes its ConfigMap; loaded embedded or from the
// directory (a Git checkout of it), the set's data is its data files only.
func TestKustomizationIsNoData(t *testing.T) {
	dir, err := filepath.Abs("../../policies")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"gpuadmit"} // data.yaml and quotas.yaml both sit under gpuadmit
	sets := map[string]Source{"embedded": Embedded(), "directory": Directory(dir)}
	for name, src := range sets {
		set, err := Compile(context.Background(), src)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got []string
		for k := range set.Data {
			got = append(got, k)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: top-level data keys differ (-want +got); kustomization.yaml was read as data:\n%s", name, diff)
		}
	}
}
