package cluster

import (
	"slices"
	"testing"
)

// The webhook process gets deploy/base's environment: its memory limit in
// bytes as the downward API gives it.
func TestDeploymentEnv(t *testing.T) {
	env, err := deploymentEnv("../../../deploy/base/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"GPUADMIT_MEMORY_LIMIT=268435456"} {
		if !slices.Contains(env, want) {
			t.Errorf("env %q lacks %s", env, want)
		}
	}
}
