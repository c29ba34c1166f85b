package mutate

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestKubectlApplyWarning: a pod that client-side `kubectl apply` created
// and whose GPU resources gpuadmit rewrote is admitted with a warning that
// applying the file again will be refused, and what to do instead. Pods
// whose resources gpuadmit keeps as written (it only adds to them), and
// pods kubectl did not apply, get none.
func TestKubectlApplyWarning(t *testing.T) {
	m := NewMutator(defaultEngine, StaticInventory{Inv: exampleInventory(t)}, MutatorOptions{})
	tests := map[string]struct {
		file    string
		applied bool
		want    bool
	}{
		"gpushare, applied: aliyun.com/gpu-mem is rewritten": {file: "gpushare.yaml", applied: true, want: true},
		"gpushare, created": {file: "gpushare.yaml"},
		"whole GPUs, applied: kept, accounting only added": {file: "nvidia-whole.yaml", applied: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := &corev1.Pod{}
			readYAML(t, "../../examples/pods/"+tc.file, p)
			if tc.applied {
				if p.Annotations == nil {
					p.Annotations = map[string]string{}
				}
				p.Annotations[corev1.LastAppliedConfigAnnotation] = `{"apiVersion":"v1","kind":"Pod"}`
			}
			res := mustMutate(t, m, p)
			if !res.Allowed {
				t.Fatalf("denied: %s", res.Message)
			}
			var got bool
			for _, w := range res.Warnings {
				if strings.Contains(w, "kubectl apply") {
					got = true
					if !strings.Contains(w, "kubectl replace --force") || !strings.Contains(w, "a Deployment") {
						t.Errorf("warning %q does not say what to do instead", w)
					}
				}
			}
			if got != tc.want {
				t.Errorf("warnings %q; want the kubectl apply warning: %v", res.Warnings, tc.want)
			}
		})
	}
}
