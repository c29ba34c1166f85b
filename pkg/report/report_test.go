package report_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/report"
	"github.com/gpuadmit/gpuadmit/pkg/usage"
)

// testView is the report of testdata/pods.yaml on examples/nodes.yaml,
// with a price for the A100-80GB only and no typical sizes: free memory is
// stranded unless a pending pod can use it.
func testView(t *testing.T) report.View {
	t.Helper()
	cfg := usage.Config{PricePerGPUHour: map[string]float64{"A100-80GB": 1.8}}
	in, err := report.Files("../../examples/nodes.yaml", "testdata/pods.yaml", cfg)
	if err != nil {
		t.Fatal(err)
	}
	return report.Of(usage.Compute(in))
}

func render(t *testing.T, format string, v report.View) string {
	t.Helper()
	var b bytes.Buffer
	if err := report.Write(&b, format, v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// The figures the files make, worked out by hand (testdata/pods.yaml says
// what each pod holds): the finished pod and the one gpuadmit did not
// admit count for nothing, the quota not named gpuadmit is not read.
func TestFigures(t *testing.T) {
	v := testView(t)
	// GPUs: 8 A100-80GB, 16 H100, 8 H200, 4 T4 and the 8 A100-40GB behind
	// the mig-single node's 56 1g.5gb devices.
	want := report.Total{GPUs: 44, CapacityMiB: 3142656, AllocatedMiB: 163840 + 33280 + 16384, FreeMiB: 3142656 - 213504,
		// All free memory but the A100-80GB pool's, where the pending pod fits.
		StrandedMiB: 3142656 - 213504 - (655360 - 163840), PendingPods: 1, PendingMiB: 163840, AllocatedCostPerHour: 3.6}
	if diff := cmp.Diff(want, v.Total); diff != "" {
		t.Errorf("total (-want +got):\n%s", diff)
	}
	hard, used, share := int64(409600), int64(197120), 0.48
	wantNS := []report.NamespaceView{
		{Name: "infer", AllocatedMiB: 16384, PendingPods: 1, PendingMiB: 163840},
		{Name: "train", AllocatedMiB: 197120, CostPerHour: 3.6, QuotaHardMiB: &hard, QuotaUsedMiB: &used, QuotaUsed: &share},
	}
	if diff := cmp.Diff(wantNS, v.Namespaces); diff != "" {
		t.Errorf("namespaces (-want +got):\n%s", diff)
	}
	for _, p := range v.Pools {
		if p.Name == "a100-80gb-whole" {
			wantAlloc := []report.Allocation{{Namespace: "train", Form: "whole", MiB: 163840, GPUs: 2}}
			if diff := cmp.Diff(wantAlloc, p.Allocated); diff != "" {
				t.Errorf("a100-80gb-whole allocated (-want +got):\n%s", diff)
			}
			if p.AllocatedCostPerHour == nil || *p.AllocatedCostPerHour != 3.6 || p.StrandedCostPerHour == nil {
				t.Errorf("a100-80gb-whole costs %v, %v; want 3.6 an hour allocated, and a stranded cost", p.AllocatedCostPerHour, p.StrandedCostPerHour)
			}
		} else if p.AllocatedCostPerHour != nil {
			t.Errorf("pool %s (%s) has a cost %v without a price", p.Name, p.Model, *p.AllocatedCostPerHour)
		}
	}
}

// The HTML page holds every figure of the JSON report: each leaf of the
// JSON, at its path, printed as the JSON prints it, in a cell marked with
// that path. It loads nothing: no script, link, image or url().
func TestHTMLHoldsEveryJSONFigure(t *testing.T) {
	v := testView(t)
	var doc any
	if err := json.Unmarshal([]byte(render(t, "json", v)), &doc); err != nil {
		t.Fatal(err)
	}
	leaves := map[string]string{}
	flatten("", doc, leaves)
	if len(leaves) < 100 {
		t.Fatalf("the JSON report has %d figures; the test data should make over 100", len(leaves))
	}
	page := render(t, "html", v)
	for _, path := range sortedKeys(leaves) {
		cell := fmt.Sprintf(`data-k="%s">%s<`, path, template.HTMLEscapeString(leaves[path]))
		if !strings.Contains(page, cell) {
			t.Errorf("the HTML lacks %s = %s (want %s)", path, leaves[path], cell)
		}
	}
	if m := regexp.MustCompile(`(?i)<script|<link|<img|<iframe|\ssrc=|\shref=|url\(|@import`).FindString(page); m != "" {
		t.Errorf("the HTML loads something (%q); it must render offline", m)
	}
	if n := strings.Count(page, "<svg "); n != 3 {
		t.Errorf("the HTML has %d charts, want 3 (pools, namespaces' memory, namespaces' cost)", n)
	}
}

// flatten puts each leaf of a decoded JSON document under its path
// (pools[0].allocated[1].mib), numbers as encoding/json prints them.
func flatten(path string, v any, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			p := k
			if path != "" {
				p = path + "." + k
			}
			flatten(p, e, out)
		}
	case []any:
		for i, e := range v {
			flatten(fmt.Sprintf("%s[%d]", path, i), e, out)
		}
	case float64:
		out[path] = strconv.FormatFloat(v, 'f', -1, 64)
	case string:
		out[path] = v
	default:
		out[path] = fmt.Sprint(v)
	}
}

func sortedKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The table shows each pool and namespace in GiB, with its cost where the
// model has a price and "-" where it has none.
func TestTable(t *testing.T) {
	out := render(t, "table", testView(t))
	for _, re := range []string{
		`(?m)^a100-80gb-whole\s+A100-80GB\s+whole\s+8\s+640\.0\s+160\.0\s+480\.0\s+0\.0\s+0\.0\s+1\s+160\.0\s+3\.60\s+0\.00\s*$`,
		`(?m)^t4-shared\s+T4\s+shared\s+4\s+60\.0\s+0\.0\s+60\.0\s+60\.0\s+0\.0\s+0\s+0\.0\s+-\s+-\s*$`,
		`(?m)^train\s+192\.5\s+3\.60\s+0\s+0\.0\s+192\.5\s+400\.0\s*$`,
		`(?m)^infer\s+16\.0\s+0\.00\s+1\s+160\.0\s+-\s+-\s*$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("the table has no line matching %s:\n%s", re, out)
		}
	}
}

func TestWriteRefusesAnUnknownFormat(t *testing.T) {
	if err := report.Write(&bytes.Buffer{}, "yaml", report.View{}); err == nil || !strings.Contains(err.Error(), `"yaml"`) {
		t.Errorf("Write(yaml) = %v, want an error naming the format", err)
	}
}

// A file of other objects is refused, naming the document and kind, not
// read as a cluster with no pods.
func TestReadObjectsRefusesOtherKinds(t *testing.T) {
	in := "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: apps/v1, kind: Deployment, metadata: {name: d}}\n"
	_, err := report.ReadObjects(strings.NewReader(in))
	if err == nil || !strings.Contains(err.Error(), "document 1: items[0]: kind Deployment") {
		t.Errorf("ReadObjects = %v, want an error naming document 1, items[0] and the kind", err)
	}
	objs, err := report.ReadObjects(strings.NewReader("kind: PodList\nitems:\n- metadata: {name: a, namespace: n}\n"))
	if err != nil || len(objs.Pods) != 1 || objs.Pods[0].Name != "a" {
		t.Errorf("ReadObjects(PodList) = %+v, %v; want pod a (a typed list's items may omit their kind)", objs, err)
	}
}

// ReadObjects reads what a user hands it: it returns objects or an error,
// never panics, on any stream.
func FuzzReadObjects(f *testing.F) {
	for _, seed := range []string{
		"kind: Pod\nmetadata: {name: a}\n",
		"kind: List\nitems:\n- kind: ResourceQuota\n  status: {hard: {cpu: 1}}\n- 3\n",
		"kind: PodList\nitems: [{spec: {containers: [{resources: {requests: {cpu: x}}}]}}]\n",
		"---\n---\nkind: ResourceSlice\nspec: {devices: [{}]}\n",
		`{"kind":"ResourceClaim","status":{"allocation":{"devices":{"results":[{}]}}}}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = report.ReadObjects(strings.NewReader(s))
	})
}

// The pods gpuadmit did not admit are not its pods, but offline their CPU
// and memory count (usage.Input.Others), which the leader's cache lacks.
func TestInputCountsOtherPodsAsOthers(t *testing.T) {
	in, err := report.Files("../../examples/nodes.yaml", "testdata/pods.yaml", usage.Config{})
	if err != nil {
		t.Fatal(err)
	}
	names := func(pods []*corev1.Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Name)
		}
		return out
	}
	if diff := cmp.Diff([]string{"unmanaged"}, names(in.Others)); diff != "" {
		t.Errorf("others (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"whole-1", "mig-1", "done-1", "infer-1", "infer-wait"}, names(in.Pods)); diff != "" {
		t.Errorf("gpuadmit's pods (-want +got):\n%s", diff)
	}
}
