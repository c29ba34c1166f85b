package policies

import (
	"os"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// TestKustomizationListsEveryPolicyFile: the ConfigMap kustomization.yaml
// generates holds every file the binaries embed (but itself), so the
// configmap overlay serves the same set as the embedded one.
func TestKustomizationListsEveryPolicyFile(t *testing.T) {
	b, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		ConfigMapGenerator []struct {
			Name  string   `json:"name"`
			Files []string `json:"files"`
		} `json:"configMapGenerator"`
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	if len(k.ConfigMapGenerator) != 1 || k.ConfigMapGenerator[0].Name != "gpuadmit-policies" {
		t.Fatalf("kustomization.yaml: configMapGenerator is %+v, want one generator named gpuadmit-policies", k.ConfigMapGenerator)
	}
	entries, err := FS.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var embedded []string
	for _, e := range entries {
		if e.Name() != "kustomization.yaml" {
			embedded = append(embedded, e.Name())
		}
	}
	listed := slices.Sorted(slices.Values(k.ConfigMapGenerator[0].Files))
	if diff := cmp.Diff(embedded, listed); diff != "" {
		t.Errorf("kustomization.yaml's configMapGenerator files differ from the embedded policy files (-embedded +listed); list every *.rego and *.yaml:\n%s", diff)
	}
}
