package offline_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpuadmit/gpuadmit/pkg/offline"
)

const workloads = `apiVersion: v1
kind: Service
metadata: {name: web}
spec: {ports: [{port: 80}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: infer, namespace: ml}
spec:
  selector: {matchLabels: {app: infer}}
  template:
    metadata: {labels: {app: infer}}
    spec:
      containers:
      - name: main
        image: cuda
        resources: {limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: 3000}}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "0 1 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers:
          - {name: train, image: cuda, resources: {limits: {nvidia.com/gpu: 2}}}
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: settings}
- apiVersion: apps/v1
  kind: StatefulSet
  metadata: {name: db}
  spec:
    selector: {matchLabels: {app: db}}
    serviceName: db
    template:
      metadata: {labels: {app: db}}
      spec:
        containers:
        - {name: db, image: postgres}
`

// TestMutateWorkloads: every pod template of a multi-document stream is
// decided as the webhook decides its pods, one result each, in order; other
// kinds are skipped with a note, not refused.
func TestMutateWorkloads(t *testing.T) {
	var notes bytes.Buffer
	outs := mutateAll(t, offline.MutateOptions{PodFile: "-", NodesFile: nodesFile, NamespaceFile: nsFile,
		Stdin: strings.NewReader(workloads), Notes: &notes})
	type summary struct{ Kind, Namespace, Name, Source string }
	var got []summary
	for _, o := range outs {
		got = append(got, summary{o["kind"].(string), o["namespace"].(string), o["name"].(string), o["source"].(string)})
		if o["allowed"] != true {
			t.Errorf("%s %s denied: %s", o["kind"], o["name"], o["message"])
		}
	}
	want := []summary{{"Deployment", "ml", "infer", "-"}, {"CronJob", "team-a", "nightly", "-"}, {"StatefulSet", "team-a", "db", "-"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	for _, skipped := range []string{`Service "web"`, `ConfigMap "settings"`} {
		if !strings.Contains(notes.String(), skipped) {
			t.Errorf("notes do not mention %s:\n%s", skipped, notes.String())
		}
	}
	if p := outs[0]["patch"].([]any); len(p) == 0 || !strings.HasPrefix(p[0].(map[string]any)["path"].(string), "/") {
		t.Errorf("the Deployment's patch %v is not a patch of its pod", p)
	}
	if n := len(outs[2]["patch"].([]any)); n != 0 {
		t.Errorf("the StatefulSet asks for no GPU, yet has %d patch operations", n)
	}
}

// TestMutateWorkloadYAML: the YAML output is the workload with its template rewritten.
func TestMutateWorkloadYAML(t *testing.T) {
	dir := t.TempDir()
	f := writeFile(t, dir, "all.yaml", workloads)
	var buf bytes.Buffer
	if err := offline.Mutate(context.Background(), offline.MutateOptions{PodFile: f, NodesFile: nodesFile, Notes: &bytes.Buffer{}}, &buf); err != nil {
		t.Fatal(err)
	}
	doc := strings.Split(buf.String(), "\n---\n")[0]
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict([]byte(doc), &d); err != nil {
		t.Fatalf("the first document is not a Deployment: %v\n%s", err, doc)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if _, ok := c.Resources.Limits["nvidia.com/gpumem"]; ok || len(c.Resources.Limits) == 0 {
		t.Errorf("the template's limits were not rewritten: %v", c.Resources.Limits)
	}
	if d.Spec.Template.Annotations["gpuadmit.io/decision"] == "" || d.Spec.Template.GenerateName != "" || d.Name != "infer" {
		t.Errorf("template metadata %+v of %s: want the decision and no pod name", d.Spec.Template.ObjectMeta, d.Name)
	}
}

// TestMutateDirectory: a directory is read recursively, *.yaml, *.yml and *.json only.
func TestMutateDirectory(t *testing.T) {
	dir := t.TempDir()
	pod, err := os.ReadFile(examples + "pods/nvidia-whole.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "a", "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "one.yaml", string(pod))
	writeFile(t, sub, "two.yml", string(pod))
	j, _ := yaml.YAMLToJSON(pod)
	writeFile(t, sub, "three.json", string(j))
	writeFile(t, sub, "notes.txt", "not a manifest")
	if outs := mutateAll(t, offline.MutateOptions{PodFile: dir, NodesFile: nodesFile}); len(outs) != 3 {
		t.Errorf("got %d results, want 3 (yaml, yml, json)", len(outs))
	}
}
