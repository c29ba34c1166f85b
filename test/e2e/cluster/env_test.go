package cluster

import (
	"path/filepath"
	"slices"
	"testing"
)

// The webhook and controller processes get deploy/base's environment: their
// memory limit in bytes as the downward API gives it (deploy/base: 480Mi
// for the webhook, 576Mi for the controller).
func TestDeploymentEnv(t *testing.T) {
	limits := map[string]string{"webhook": "503316480", "controller": "603979776"}
	for _, p := range parts {
		env, err := deploymentEnv(filepath.Join("../../..", p.manifest), p.container)
		if err != nil {
			t.Fatal(err)
		}
		want := "GPUADMIT_MEMORY_LIMIT=" + limits[p.container]
		if !slices.Contains(env, want) {
			t.Errorf("%s: env %q lacks %s", p.container, env, want)
		}
	}
}
