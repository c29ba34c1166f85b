package intent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestReadHints(t *testing.T) {
	tests := map[string]struct {
		pod  *corev1.Pod
		want Pod
	}{
		"none":                       {pod: podOf(ctr("a")), want: Pod{}},
		"class from a label":         {pod: labeled(podOf(ctr("a")), "gpuadmit.io/class=training"), want: Pod{Class: "training"}},
		"class from an annotation":   {pod: annotated(podOf(ctr("a")), "gpuadmit.io/class=batch"), want: Pod{Class: "batch"}},
		"class in both, the same":    {pod: annotated(labeled(podOf(ctr("a")), "gpuadmit.io/class=inference"), "gpuadmit.io/class=inference"), want: Pod{Class: "inference"}},
		"backend and model":          {pod: annotated(podOf(ctr("a")), "gpuadmit.io/backend=mig", "gpuadmit.io/model=H100-SXM5-80GB"), want: Pod{Backend: BackendMIG, Model: "H100-SXM5-80GB"}},
		"backend shared":             {pod: annotated(podOf(ctr("a")), "gpuadmit.io/backend=shared"), want: Pod{Backend: BackendShared}},
		"hints beside a GPU request": {pod: annotated(podOf(ctr("a", "nvidia.com/gpu=1")), "gpuadmit.io/backend=whole"), want: Pod{Backend: BackendWhole, Requests: []Request{{Container: "a", Kind: App, Dialect: NVIDIA, Form: Whole, Count: 1, Source: []string{"nvidia.com/gpu=1"}}}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, errs := Read(tc.pod)
			if len(errs) > 0 {
				t.Fatalf("Read: unexpected errors: %v", errs)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Read (-want +got):\n%s", diff)
			}
		})
	}
}
