package mutate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// h100Shares is a node of 2 H100s where gpuadmit's agent serves 4 shares of
// 20389 MiB per GPU (81559 / 4, rounded down).
func h100Shares() corev1.Node {
	n := gpuNode("h100s", "NVIDIA-H100-80GB-HBM3", map[string]string{inventory.LabelCount: "2"}, map[string]int64{"gpuadmit.io/gpu-mem": 8})
	n.Annotations = map[string]string{allocator.AnnotationShare: `{"resource":"gpuadmit.io/gpu-mem","unitMiB":20389,"sharesPerGPU":4}`}
	return n
}

// On a pool of gpuadmit's agent every container takes exactly one share, so
// the stock scheduler's node-wide count of free devices is a count of free
// shares, each on one GPU: a 60 GiB share can never be bound to a node with
// 40+40 GiB free on two GPUs, as several units of one resource could.
func TestOneShareSizePerPool(t *testing.T) {
	tests := map[string]struct {
		limits   map[string]string
		want     map[string]string
		wantDeny []string
	}{
		"3000 MiB takes one share":                     {limits: map[string]string{"nvidia.com/gpumem": "3000"}, want: map[string]string{"gpuadmit.io/gpu-mem": "1"}},
		"20389 MiB is exactly one share":               {limits: map[string]string{"nvidia.com/gpumem": "20389"}, want: map[string]string{"gpuadmit.io/gpu-mem": "1"}},
		"a quarter of the GPU is one share":            {limits: map[string]string{"gpuadmit.io/gpu": "250m"}, want: map[string]string{"gpuadmit.io/gpu-mem": "1"}},
		"a third of the GPU is more than a quarter":    {limits: map[string]string{"gpuadmit.io/gpu": "333m"}, wantDeny: []string{"333/1000 of a GPU exceeds the pool's one share size, 1/4 of a GPU"}},
		"a gpushare request of 12 GiB is one share":    {limits: map[string]string{"aliyun.com/gpu-mem": "12"}, want: map[string]string{"gpuadmit.io/gpu-mem": "1"}},
		"60 GiB does not fit one share":                {limits: map[string]string{"gpuadmit.io/gpu-memory": "60Gi"}, wantDeny: []string{"61440 MiB exceeds the pool's one share size, 20389 MiB"}},
		"20390 MiB is one MiB over the share":          {limits: map[string]string{"nvidia.com/gpumem": "20390"}, wantDeny: []string{"exceeds the pool's one share size"}},
		"a share dialect of several units is re-sized": {limits: map[string]string{"gpuadmit.io/gpu-mem": "30"}, wantDeny: []string{"30720 MiB exceeds"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := mustMutate(t, mutator(h100Shares()), pod("p", tc.limits))
			if len(tc.wantDeny) > 0 {
				if res.Allowed {
					t.Fatalf("allowed with %v, want a denial", gpuResources(res.Pod.Spec.Containers[0]))
				}
				for _, w := range tc.wantDeny {
					if !strings.Contains(res.Message, w) {
						t.Errorf("message %q does not contain %q", res.Message, w)
					}
				}
				return
			}
			if !res.Allowed {
				t.Fatalf("denied: %s", res.Message)
			}
			if diff := cmp.Diff(tc.want, gpuResources(res.Pod.Spec.Containers[0])); diff != "" {
				t.Errorf("resources (-want +got):\n%s", diff)
			}
		})
	}
}
