package deploy_test

import (
	"os"
	"regexp"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpuadmit/gpuadmit/pkg/intent"
)

// TestMatchConditionsSendEveryDialectKey: a pod that asks for GPU with any
// resource intent reads, alone, reaches the webhook; one the matchConditions
// missed would keep its foreign key and never schedule. The Helm chart lists
// the same prefixes as the base.
func TestMatchConditionsSendEveryDialectKey(t *testing.T) {
	b, err := os.ReadFile("base/mutatingwebhookconfiguration.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m admissionregistrationv1.MutatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		t.Fatal(err)
	}
	cases := map[string]celCase{"a MIG profile": {object: pod(limit(intent.ResourceMIGPrefix+"2g.20gb", "1")), want: true}}
	for _, k := range intent.Resources() {
		cases[string(k)+" in limits"] = celCase{object: pod(limit(string(k), "1")), want: true}
		cases[string(k)+" in requests"] = celCase{object: pod(request(string(k), "1")), want: true}
	}
	checkMatchConditions(t, m.Webhooks[0].MatchConditions, cases)

	helm, err := os.ReadFile("helm/gpuadmit/templates/mutatingwebhookconfiguration.yaml")
	if err != nil {
		t.Fatal(err)
	}
	prefixes := regexp.MustCompile(`\['nvidia\.com/gpu'[^\]]*\]`)
	want := prefixes.FindAllString(string(b), -1)
	got := prefixes.FindAllString(string(helm), -1)
	if len(want) == 0 || len(got) != len(want) || got[0] != want[0] || got[len(got)-1] != want[0] {
		t.Errorf("the Helm chart's resource prefixes %q differ from the base's %q", got, want)
	}
}
