package mutate

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// decisionLine is what the decision log line says, as its JSON has it.
type decisionLine struct {
	Outcome  string                       `json:"outcome"`
	Revision string                       `json:"revision"`
	Asked    map[string]map[string]string `json:"asked"`
}

// TestDecisionLogFields: the decision log line's fields are structured — the
// request as a map by container (KAI's annotations under their own key), and
// the revision on denials too, as their message names it.
func TestDecisionLogFields(t *testing.T) {
	examples := NewMutator(defaultEngine, StaticInventory{Inv: exampleInventory(t)}, MutatorOptions{})
	empty := NewMutator(defaultEngine, StaticInventory{Inv: inventory.Build(nil, allocator.Default())}, MutatorOptions{})
	tests := map[string]struct {
		m    *Mutator
		file string
		want decisionLine
	}{
		"HAMi, one container": {m: examples, file: "hami-memory.yaml", want: decisionLine{Outcome: OutcomeMutated,
			Asked: map[string]map[string]string{"infer": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000", "nvidia.com/gpucores": "30"}}}},
		"KAI asks by annotations": {m: examples, file: "kai-fraction.yaml", want: decisionLine{Outcome: OutcomeMutated,
			Asked: map[string]map[string]string{askedAnnotations: {"gpu-fraction": "0.25", "gpu-fraction-container-name": "worker"}}}},
		"denied for want of pools": {m: empty, file: "nvidia-whole.yaml", want: decisionLine{Outcome: OutcomeDenied,
			Asked: map[string]map[string]string{"train": {"nvidia.com/gpu": "2"}}}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			p := &corev1.Pod{}
			readYAML(t, "../../examples/pods/"+tt.file, p)
			h := NewHandler(tt.m, teamA(t), podScheme(), HandlerOptions{})
			lines := &logLines{}
			ctx := logf.IntoContext(context.Background(), funcr.NewJSON(lines.add, funcr.Options{}))
			h.Handle(ctx, podReview(t, p))
			got := lines.decision(t)
			if got.Revision == "" || !strings.HasPrefix(got.Revision, "sha256-") {
				t.Errorf("revision %q, want the policy revision that decided", got.Revision)
			}
			got.Revision = ""
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decision line (-want +got):\n%s", diff)
			}
		})
	}
}

// logLines keeps the JSON log lines funcr writes.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(obj string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, obj)
}

// decision decodes the one "decision" line.
func (l *logLines) decision(t *testing.T) decisionLine {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var found []decisionLine
	for _, s := range l.lines {
		var line struct {
			Msg string `json:"msg"`
			decisionLine
		}
		if err := json.Unmarshal([]byte(s), &line); err != nil {
			t.Fatalf("log line %s: %v", s, err)
		}
		if line.Msg == "decision" {
			found = append(found, line.decisionLine)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d decision lines in %q, want one", len(found), l.lines)
	}
	return found[0]
}

// podReview is a CREATE review of p.
func podReview(t *testing.T, p *corev1.Pod) admission.Request {
	t.Helper()
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Namespace: p.Namespace,
		Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
	}}
}
