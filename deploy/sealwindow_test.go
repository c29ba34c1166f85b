package deploy_test

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// TestHelmSealWindow: webhook.sealWindow reaches the webhook's
// --seal-window, the default leaves the flag out (the binary's 90s), and a
// value that is no duration is refused at render time rather than by a
// webhook that exits on its flags.
func TestHelmSealWindow(t *testing.T) {
	tl := findTools(t)
	sealArgs := func(objs objects) []string {
		d := get[*appsv1.Deployment](t, objs, "Deployment", namespace, "gpuadmit-webhook")
		var got []string
		for _, a := range container(t, d.Spec.Template.Spec.Containers, "webhook").Args {
			if strings.HasPrefix(a, "--seal-window") {
				got = append(got, a)
			}
		}
		return got
	}
	if got := sealArgs(tl.template(t)); len(got) != 0 {
		t.Errorf("default values: webhook args carry %q, want no --seal-window (the binary's default)", got)
	}
	if got := sealArgs(tl.template(t, "--set", "webhook.sealWindow=2m")); !slices.Equal(got, []string{"--seal-window=2m"}) {
		t.Errorf("webhook.sealWindow=2m: webhook args carry %q, want [--seal-window=2m]", got)
	}
	for _, bad := range []string{"90", "two minutes", "1h"} {
		if _, err := tl.templateErr(t, "--set", "webhook.sealWindow="+bad); err == nil || !strings.Contains(err.Error(), "webhook/sealWindow") {
			t.Errorf("webhook.sealWindow=%s: got error %v, want one naming webhook/sealWindow", bad, err)
		}
	}
}
