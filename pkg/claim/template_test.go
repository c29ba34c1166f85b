package claim

import "testing"

func TestTemplateNamesStandForTheirSpec(t *testing.T) {
	name := TemplateName(10240)
	if mib, ok := ShareOf(name); !ok || mib != 10240 {
		t.Fatalf("ShareOf(%q) = %d, %v; want 10240, true", name, mib, ok)
	}
	if TemplateName(10240) == TemplateName(20480) {
		t.Error("two shares have one template name")
	}
	for _, bad := range []string{
		"gpuadmit-share-10240mi-0000000000", // the hash of another spec
		"gpuadmit-share-x-" + name[len(name)-10:],
		"gpuadmit-share-0mi-0000000000",
		"other-10240mi",
	} {
		if _, ok := ShareOf(bad); ok {
			t.Errorf("ShareOf(%q) accepted a name gpuadmit does not write", bad)
		}
	}
	if tmpl := Template("team-a", 512); tmpl.Name != TemplateName(512) || tmpl.Labels[ManagedBy] != "gpuadmit" {
		t.Errorf("Template = %s %v", tmpl.Name, tmpl.Labels)
	}
}
