package cluster

import (
	"path/filepath"
	"slices"
	"testing"
)

// The webhook and controller processes get deploy/base's environment: their
// memory limit in bytes as the downward API gives it (deploy/base: 384Mi).
func TestDeploymentEnv(t *testing.T) {
	for _, p := range parts {
		env, err := deploymentEnv(filepath.Join("../../..", p.manifest), p.container)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"GPUADMIT_MEMORY_LIMIT=402653184"} {
			if !slices.Contains(env, want) {
				t.Errorf("%s: env %q lacks %s", p.container, env, want)
			}
		}
	}
}
