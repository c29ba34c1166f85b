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
		"backend time-sliced":        {pod: annotated(podOf(ctr("a")), "gpuadmit.io/backend=time-sliced"), want: Pod{Backend: BackendTimeSliced}},
		"HAMi GPU types, trimmed":    {pod: annotated(podOf(ctr("a")), "nvidia.com/use-gputype=A100, V100", "nvidia.com/nouse-gputype=1080"), want: Pod{UseTypes: []string{"A100", "V100"}, AvoidTypes: []string{"1080"}}},
		"HAMi MIG mode":              {pod: annotated(podOf(ctr("a")), "nvidia.com/vgpu-mode=mig"), want: Pod{Backend: BackendMIG}},
		"Volcano MIG mode":           {pod: annotated(podOf(ctr("a")), "volcano.sh/vgpu-mode=mig"), want: Pod{Backend: BackendMIG}},
		"MIG mode and backend agree": {pod: annotated(podOf(ctr("a")), "nvidia.com/vgpu-mode=mig", "gpuadmit.io/backend=mig"), want: Pod{Backend: BackendMIG}},
		"hami-core is warned about": {pod: annotated(podOf(ctr("a")), "volcano.sh/vgpu-mode=hami-core"), want: Pod{Warnings: []string{
			`metadata.annotations[volcano.sh/vgpu-mode]="hami-core": gpuadmit has no HAMi-core or MPS mode; the policy chooses a MIG slice, a memory share, time-sliced replicas or whole GPUs (set gpuadmit.io/backend to narrow it)`}}},
		"UUID pins and packing hints are warned about, key by key": {
			pod: annotated(podOf(ctr("a")), "nvidia.com/use-gpuuuid=GPU-1", "volcano.sh/vgpu-nouse-gpuuuid=GPU-2", "hami.io/gpu-scheduler-policy=binpack", "nvidia.com/numa-bind=true"),
			want: Pod{Warnings: []string{
				`metadata.annotations[hami.io/gpu-scheduler-policy]="binpack" is a packing hint of another scheduler; gpuadmit's pool choice and the pod's scheduler decide packing, so it is not honoured`,
				`metadata.annotations[nvidia.com/numa-bind]="true" asks for GPUs of one NUMA node; gpuadmit does not place by NUMA node, so it is not honoured`,
				`metadata.annotations[nvidia.com/use-gpuuuid]="GPU-1" pins GPUs by UUID; gpuadmit places the pod on a pool, not on one GPU, so the pin is not honoured`,
				`metadata.annotations[volcano.sh/vgpu-nouse-gpuuuid]="GPU-2" pins GPUs by UUID; gpuadmit places the pod on a pool, not on one GPU, so the pin is not honoured`,
			}},
		},
		"nvidia.com/gpu.shared sends the pod to time-sliced GPUs": {pod: podOf(ctr("a", "nvidia.com/gpu.shared=1"), ctr("b", "nvidia.com/gpu=1")), want: Pod{Backend: BackendTimeSliced, Requests: []Request{
			{Container: "a", Kind: App, Dialect: NVIDIAShared, Form: Whole, Count: 1, Source: []string{"nvidia.com/gpu.shared=1"}},
			{Container: "b", Kind: App, Index: 1, Dialect: NVIDIA, Form: Whole, Count: 1, Source: []string{"nvidia.com/gpu=1"}}}}},
		"nvidia.com/gpu.shared with the time-sliced hint": {pod: annotated(podOf(ctr("a", "nvidia.com/gpu.shared=1")), "gpuadmit.io/backend=time-sliced"), want: Pod{Backend: BackendTimeSliced, Requests: []Request{
			{Container: "a", Kind: App, Dialect: NVIDIAShared, Form: Whole, Count: 1, Source: []string{"nvidia.com/gpu.shared=1"}}}}},
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
