package cluster

import (
	"path/filepath"
	"slices"
	"testing"
)

// The webhook and controller processes get deploy/base's environment: their
// memory limit in bytes as the downward API gives it (deploy/base: 544Mi
// for the webhook, 672Mi for the controller).
func TestDeploymentEnv(t *testing.T) {
	limits := map[string]string{"webhook": "570425344", "controller": "704643072"}
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
