package offline_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuadmit/gpuadmit/pkg/offline"
)

var update = flag.Bool("update", false, "rewrite testdata/peers.golden.json from the current output")

// peerResult is what the golden file records of one result.
type peerResult struct {
	Source   string   `json:"source"`
	Object   string   `json:"object"`
	Allowed  bool     `json:"allowed"`
	Decision string   `json:"decision,omitempty"`
	Message  string   `json:"message,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// revision masks the policy revision, which changes with every policy edit.
var revision = regexp.MustCompile(`sha256-[0-9a-f]+`)

// TestPeerManifests runs gpuadmit mutate over the published example
// manifests of HAMi, gpushare, KAI, Volcano, NVIDIA's device plugin and GPU
// Operator (testdata/peers, each file naming its source). No file is
// refused; each result is a rewrite (with warnings that name what was not
// honoured) or a denial that says why, per pool or per field.
func TestPeerManifests(t *testing.T) {
	var notes bytes.Buffer
	outs := mutateAll(t, offline.MutateOptions{PodFile: "testdata/peers", NodesFile: nodesFile, NamespaceFile: nsFile, Notes: &notes})
	if len(outs) < 30 {
		t.Fatalf("got %d results, want one per pod template of testdata/peers", len(outs))
	}
	var got []peerResult
	for _, o := range outs {
		r := peerResult{Source: strings.TrimPrefix(o["source"].(string), "testdata/peers/"),
			Object: o["kind"].(string) + " " + o["name"].(string), Allowed: o["allowed"].(bool)}
		checkPeerShape(t, r.Source, o)
		pod, _ := o["pod"].(map[string]any)
		md, _ := pod["metadata"].(map[string]any)
		ann, _ := md["annotations"].(map[string]any)
		r.Decision, _ = ann["gpuadmit.io/decision"].(string)
		r.Decision = revision.ReplaceAllString(r.Decision, "REVISION")
		r.Message = revision.ReplaceAllString(o["message"].(string), "REVISION")
		for _, w := range o["warnings"].([]any) {
			r.Warnings = append(r.Warnings, w.(string))
		}
		got = append(got, r)
	}
	comparePeerGolden(t, "testdata/peers.golden.json", got)
	if !strings.Contains(notes.String(), "skipping batch.volcano.sh/v1alpha1 Job") {
		t.Errorf("notes do not mention the skipped Volcano Job:\n%s", notes.String())
	}
}

// checkPeerShape asserts that a result is a rewrite or a denial that says why.
func checkPeerShape(t *testing.T, source string, o map[string]any) {
	t.Helper()
	if o["allowed"] != true {
		msg, _ := o["message"].(string)
		if !strings.Contains(msg, "pool ") && !strings.Contains(msg, "spec.") && !strings.Contains(msg, "metadata.annotations[") {
			t.Errorf("%s: denial %q names no pool and no field", source, msg)
		}
		return
	}
	if len(o["patch"].([]any)) == 0 {
		t.Errorf("%s: allowed without a rewrite", source)
	}
	for _, w := range o["warnings"].([]any) {
		if s := w.(string); !strings.Contains(s, "metadata.annotations[") && !strings.Contains(s, `container "`) && !strings.Contains(s, "spec.") {
			t.Errorf("%s: warning %q names neither a key, a field nor a container", source, s)
		}
	}
	spec, _ := o["pod"].(map[string]any)["spec"].(map[string]any)
	if s, _ := spec["schedulerName"].(string); s == "kai-scheduler" || s == "volcano" || s == "hami-scheduler" {
		t.Errorf("%s: the rewritten pod keeps the foreign scheduler %s, which gpuadmit takes its pods over from", source, s)
	}
	md, _ := o["pod"].(map[string]any)["metadata"].(map[string]any)
	if ann, _ := md["annotations"].(map[string]any); ann["gpu-fraction"] != nil || ann["gpu-memory"] != nil {
		t.Errorf("%s: the rewritten pod keeps KAI's annotations %v", source, ann)
	}
	b, _ := json.Marshal(spec)
	if left := regexp.MustCompile(`"(nvidia\.com/gpu(mem|cores|mem-percentage)|nvidia\.com/priority|volcano\.sh/[a-z-]+|aliyun\.com/[a-z-]+)"`).FindString(string(b)); left != "" {
		t.Errorf("%s: the rewritten pod still carries %s", source, left)
	}
}

func comparePeerGolden(t *testing.T, path string, got []peerResult) {
	t.Helper()
	if *update {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(got); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	var want []peerResult
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}
