package deploy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
)

// TestExamplePriorityClassesShipped: every PriorityClass the example
// namespace maps a class to is in the files a newcomer applies (the base's
// classes and examples/priorityclass.yaml), so the documented examples are
// not refused for a class nothing ships.
func TestExamplePriorityClassesShipped(t *testing.T) {
	shipped := map[string]bool{}
	for _, f := range []string{filepath.Join("base", "priorityclasses.yaml"), filepath.Join("..", "examples", "priorityclass.yaml")} {
		for _, obj := range decode(t, readFile(t, f)) {
			if pc, ok := obj.(*schedulingv1.PriorityClass); ok {
				shipped[pc.Name] = true
			}
		}
	}
	objs := decode(t, readFile(t, filepath.Join("..", "examples", "namespace.yaml")))
	ns := get[*corev1.Namespace](t, objs, "Namespace", "", "team-a")
	named := 0
	for k, v := range ns.Labels {
		if !strings.HasPrefix(k, "gpuadmit.io/priority.") {
			continue
		}
		named++
		if !shipped[v] {
			t.Errorf("examples/namespace.yaml maps %s to PriorityClass %q, which neither deploy/base nor examples/ ship", k, v)
		}
	}
	if named == 0 {
		t.Error("examples/namespace.yaml maps no class to a PriorityClass; this test checks nothing")
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
