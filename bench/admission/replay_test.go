package admission

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// TestReplayerAnswersFromItsFile: the replay path answers every pod with
// the patch in its file, read at the first review (the benchmark writes it
// after the server starts); without a readable, non-empty patch it fails
// the review loudly, never allows it unchanged.
func TestReplayerAnswersFromItsFile(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	review := func() cradmission.Request {
		p := Pod(Namespace, "p", 0)
		p.APIVersion, p.Kind = "v1", "Pod"
		raw, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		return cradmission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: types.UID("u"), Operation: admissionv1.Create,
			Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Object: runtime.RawExtension{Raw: raw}}}
	}
	file := filepath.Join(t.TempDir(), "replay-patch.json")
	r := &replayer{decoder: cradmission.NewDecoder(scheme), file: file}
	if res := r.Handle(context.Background(), review()); res.Allowed || res.Result == nil || res.Result.Code != 500 {
		t.Fatalf("before the file is written: %+v, want a 500", res.Result)
	}
	want := []jsonpatch.Operation{{Operation: "add", Path: "/spec/nodeSelector", Value: map[string]any{"pool": "a"}}}
	b, _ := json.Marshal(want)
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		res := r.Handle(context.Background(), review())
		if !res.Allowed || string(res.Patch) != string(b) || res.PatchType == nil || *res.PatchType != admissionv1.PatchTypeJSONPatch {
			t.Fatalf("answer allowed %v, patch %s, want %s", res.Allowed, res.Patch, b)
		}
	}
	if err := os.WriteFile(file, []byte("[]"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := &replayer{decoder: cradmission.NewDecoder(scheme), file: file}
	if res := empty.Handle(context.Background(), review()); res.Allowed || !strings.Contains(res.Result.Message, "empty") {
		t.Errorf("an empty patch: %+v, want a failure saying so", res.Result)
	}
}

// TestPatchBetweenLeavesServerFields: the captured patch holds what
// gpuadmit changed and none of what the API server sets on every create.
func TestPatchBetweenLeavesServerFields(t *testing.T) {
	a := Pod(Namespace, "replay", 0)
	a.UID, a.ResourceVersion = "uid-a", "10"
	a.CreationTimestamp = metav1.Unix(100, 0)
	a.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "bench"}}
	b := a.DeepCopy()
	b.UID, b.ResourceVersion = "uid-b", "11"
	b.CreationTimestamp = metav1.Unix(200, 0)
	b.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "other"}}
	b.Spec.NodeSelector = map[string]string{"pool": "a"}
	ops, err := patchBetween(a, b)
	if err != nil {
		t.Fatal(err)
	}
	want := []jsonpatch.Operation{{Operation: "add", Path: "/spec/nodeSelector", Value: map[string]any{"pool": "a"}}}
	if d := cmp.Diff(want, ops); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	b.Spec.NodeSelector = nil
	if _, err := patchBetween(a, b); err == nil {
		t.Error("pods alike but for the server's fields: want an error, there is nothing to replay")
	}
}

// TestReplayNeedsOneTemplate: replay answers every pod with one patch, so
// a run with pods of several shapes cannot have it.
func TestReplayNeedsOneTemplate(t *testing.T) {
	o := Options{Configs: []string{Noop, Replay, Gpuadmit}, Mix: MixShapes}
	if err := o.defaults(); err == nil || !strings.Contains(err.Error(), "--mix template") {
		t.Errorf("replay with the shapes mix: err %v, want one naming --mix template", err)
	}
	o = Options{Configs: []string{Noop, Replay, Gpuadmit}, Mix: MixTemplate}
	if err := o.defaults(); err != nil {
		t.Errorf("replay with the template mix: %v", err)
	}
	if o = (Options{}); o.defaults() != nil || len(o.Configs) != len(Configurations) {
		t.Errorf("default configurations %v, want %v (replay only when asked)", o.Configs, Configurations)
	}
}
