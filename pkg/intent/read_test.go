package intent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestReadDialects(t *testing.T) {
	tests := map[string]struct {
		pod  *corev1.Pod
		want []Request
	}{
		"native whole GPUs": {
			pod:  podOf(ctr("train", "gpuadmit.io/gpu=2", "cpu=4")),
			want: []Request{{Container: "train", Kind: App, Dialect: Native, Form: Whole, Count: 2, Source: []string{"gpuadmit.io/gpu=2"}}},
		},
		"native fraction": {
			pod:  podOf(ctr("infer", "gpuadmit.io/gpu=500m")),
			want: []Request{{Container: "infer", Kind: App, Dialect: Native, Form: Fraction, Count: 1, FractionMilli: 500, Source: []string{"gpuadmit.io/gpu=500m"}}},
		},
		"native tiny fraction rounds up to a thousandth": {
			pod:  podOf(ctr("infer", "gpuadmit.io/gpu=1e-9")),
			want: []Request{{Container: "infer", Kind: App, Dialect: Native, Form: Fraction, Count: 1, FractionMilli: 1, Source: []string{"gpuadmit.io/gpu=1e-9"}}},
		},
		"native memory alone rounds bytes up to MiB": {
			pod:  podOf(ctr("infer", "gpuadmit.io/gpu-memory=10G")),
			want: []Request{{Container: "infer", Kind: App, Dialect: Native, Form: Memory, Count: 1, MemoryMiB: 9537, Source: []string{"gpuadmit.io/gpu-memory=10G"}}},
		},
		"native memory on two GPUs": {
			pod: podOf(ctr("train", "gpuadmit.io/gpu=2", "gpuadmit.io/gpu-memory=8000Mi")),
			want: []Request{{Container: "train", Kind: App, Dialect: Native, Form: Memory, Count: 2, MemoryMiB: 8000,
				Source: []string{"gpuadmit.io/gpu-memory=8000Mi", "gpuadmit.io/gpu=2"}}},
		},
		"nvidia whole GPU": {
			pod:  podOf(ctr("a", "nvidia.com/gpu=1")),
			want: []Request{{Container: "a", Kind: App, Dialect: NVIDIA, Form: Whole, Count: 1, Source: []string{"nvidia.com/gpu=1"}}},
		},
		"nvidia time-sliced replicas": {
			pod:  podOf(ctr("a", "nvidia.com/gpu.shared=2")),
			want: []Request{{Container: "a", Kind: App, Dialect: NVIDIAShared, Form: Whole, Count: 2, Source: []string{"nvidia.com/gpu.shared=2"}}},
		},
		"hami memory": {
			pod: podOf(ctr("a"), ctr("b", "nvidia.com/gpu=1", "nvidia.com/gpumem=3000")),
			want: []Request{{Container: "b", Kind: App, Index: 1, Dialect: HAMi, Form: Memory, Count: 1, MemoryMiB: 3000,
				Source: []string{"nvidia.com/gpu=1", "nvidia.com/gpumem=3000"}}},
		},
		"hami memory without a count is one GPU": {
			pod:  podOf(ctr("a", "nvidia.com/gpumem=3000", "nvidia.com/gpucores=30")),
			want: []Request{{Container: "a", Kind: App, Dialect: HAMi, Form: Memory, Count: 1, MemoryMiB: 3000, CoresPercent: 30, Source: []string{"nvidia.com/gpucores=30", "nvidia.com/gpumem=3000"}}},
		},
		"hami memory percentage": {
			pod:  podOf(ctr("a", "nvidia.com/gpu=2", "nvidia.com/gpumem-percentage=25")),
			want: []Request{{Container: "a", Kind: App, Dialect: HAMi, Form: Fraction, Count: 2, FractionMilli: 250, Source: []string{"nvidia.com/gpu=2", "nvidia.com/gpumem-percentage=25"}}},
		},
		"hami cores alone is a whole GPU": {
			pod:  podOf(ctr("a", "nvidia.com/gpucores=50")),
			want: []Request{{Container: "a", Kind: App, Dialect: HAMi, Form: Whole, Count: 1, CoresPercent: 50, Source: []string{"nvidia.com/gpucores=50"}}},
		},
		"mig profile": {
			pod:  podOf(ctr("a", "nvidia.com/mig-3g.40gb=2")),
			want: []Request{{Container: "a", Kind: App, Dialect: MIG, Form: Profile, Count: 2, Profile: "3g.40gb", Source: []string{"nvidia.com/mig-3g.40gb=2"}}},
		},
		"mig media extension spelled as a resource name": {
			pod:  podOf(ctr("a", "nvidia.com/mig-1g.10gb.me=1")),
			want: []Request{{Container: "a", Kind: App, Dialect: MIG, Form: Profile, Count: 1, Profile: "1g.10gb+me", Source: []string{"nvidia.com/mig-1g.10gb.me=1"}}},
		},
		"mig media extension with a plus": {
			pod:  podOf(ctr("a", "nvidia.com/mig-7g.141gb+me=1")),
			want: []Request{{Container: "a", Kind: App, Dialect: MIG, Form: Profile, Count: 1, Profile: "7g.141gb+me", Source: []string{"nvidia.com/mig-7g.141gb+me=1"}}},
		},
		"share in GiB": {
			pod:  podOf(ctr("a", "gpuadmit.io/gpu-mem=10")),
			want: []Request{{Container: "a", Kind: App, Dialect: Share, Form: Memory, Count: 1, MemoryMiB: 10240, Source: []string{"gpuadmit.io/gpu-mem=10"}}},
		},
		"gpushare in GiB": {
			pod:  podOf(ctr("a", "aliyun.com/gpu-mem=4")),
			want: []Request{{Container: "a", Kind: App, Dialect: GPUShare, Form: Memory, Count: 1, MemoryMiB: 4096, Source: []string{"aliyun.com/gpu-mem=4"}}},
		},
		"volcano memory and cores": {
			pod: podOf(ctr("a", "volcano.sh/vgpu-number=2", "volcano.sh/vgpu-memory=4096", "volcano.sh/vgpu-cores=50")),
			want: []Request{{Container: "a", Kind: App, Dialect: Volcano, Form: Memory, Count: 2, MemoryMiB: 4096, CoresPercent: 50,
				Source: []string{"volcano.sh/vgpu-cores=50", "volcano.sh/vgpu-memory=4096", "volcano.sh/vgpu-number=2"}}},
		},
		"volcano number alone": {
			pod:  podOf(ctr("a", "volcano.sh/vgpu-number=1")),
			want: []Request{{Container: "a", Kind: App, Dialect: Volcano, Form: Whole, Count: 1, Source: []string{"volcano.sh/vgpu-number=1"}}},
		},
		"volcano memory percentage": {
			pod:  podOf(ctr("a", "volcano.sh/vgpu-number=1", "volcano.sh/vgpu-memory-percentage=50")),
			want: []Request{{Container: "a", Kind: App, Dialect: Volcano, Form: Fraction, Count: 1, FractionMilli: 500, Source: []string{"volcano.sh/vgpu-memory-percentage=50", "volcano.sh/vgpu-number=1"}}},
		},
		"volcano's older share in MiB": {
			pod:  podOf(ctr("a", "volcano.sh/gpu-memory=1024")),
			want: []Request{{Container: "a", Kind: App, Dialect: VolcanoShare, Form: Memory, Count: 1, MemoryMiB: 1024, Source: []string{"volcano.sh/gpu-memory=1024"}}},
		},
		"volcano's older whole GPUs": {
			pod:  podOf(ctr("a", "volcano.sh/gpu-number=2")),
			want: []Request{{Container: "a", Kind: App, Dialect: VolcanoShare, Form: Whole, Count: 2, Source: []string{"volcano.sh/gpu-number=2"}}},
		},
		"hami priority is read beside a request": {
			pod:  podOf(ctr("a", "nvidia.com/gpu=1", "nvidia.com/gpumem=3000", "nvidia.com/priority=0")),
			want: []Request{{Container: "a", Kind: App, Dialect: HAMi, Form: Memory, Count: 1, MemoryMiB: 3000, Source: []string{"nvidia.com/gpu=1", "nvidia.com/gpumem=3000", "nvidia.com/priority=0"}}},
		},
		"kai fraction goes to the first app container": {
			pod:  annotated(withInit(podOf(ctr("main"), ctr("side")), ctr("setup")), "gpu-fraction=0.5"),
			want: []Request{{Container: "main", Kind: App, Dialect: KAI, Form: Fraction, Count: 1, FractionMilli: 500, Source: []string{"annotation gpu-fraction=0.5"}}},
		},
		"kai fraction rounds up to thousandths": {
			pod:  annotated(podOf(ctr("main")), "gpu-fraction=.3333"),
			want: []Request{{Container: "main", Kind: App, Dialect: KAI, Form: Fraction, Count: 1, FractionMilli: 334, Source: []string{"annotation gpu-fraction=.3333"}}},
		},
		"kai memory on two GPUs of a named container": {
			pod: annotated(podOf(ctr("a"), ctr("b")), "gpu-memory=2048", "gpu-fraction-num-devices=2", "gpu-fraction-container-name=b"),
			want: []Request{{Container: "b", Kind: App, Index: 1, Dialect: KAI, Form: Memory, Count: 2, MemoryMiB: 2048,
				Source: []string{"annotation gpu-fraction-container-name=b", "annotation gpu-fraction-num-devices=2", "annotation gpu-memory=2048"}}},
		},
		"kai may name an init container": {
			pod:  annotated(withInit(podOf(ctr("a")), ctr("warm")), "gpu-fraction=1", "gpu-fraction-container-name=warm"),
			want: []Request{{Container: "warm", Kind: Init, Dialect: KAI, Form: Fraction, Count: 1, FractionMilli: 1000, Source: []string{"annotation gpu-fraction-container-name=warm", "annotation gpu-fraction=1"}}},
		},
		"a key only in requests is read from requests": {
			pod:  podOf(requesting(ctr("a"), "nvidia.com/gpu=1")),
			want: []Request{{Container: "a", Kind: App, Dialect: NVIDIA, Form: Whole, Count: 1, Source: []string{"nvidia.com/gpu=1"}}},
		},
		"equal requests and limits": {
			pod:  podOf(requesting(ctr("a", "nvidia.com/gpu=2"), "nvidia.com/gpu=2")),
			want: []Request{{Container: "a", Kind: App, Dialect: NVIDIA, Form: Whole, Count: 2, Source: []string{"nvidia.com/gpu=2"}}},
		},
		"init containers and sidecars come first, in order": {
			pod: withInit(podOf(ctr("app", "nvidia.com/gpu=1")),
				ctr("init", "gpuadmit.io/gpu=1"), ctr("plain"), sidecar(ctr("side", "gpuadmit.io/gpu=250m"))),
			want: []Request{
				{Container: "init", Kind: Init, Dialect: Native, Form: Whole, Count: 1, Source: []string{"gpuadmit.io/gpu=1"}},
				{Container: "side", Kind: Sidecar, Index: 2, Dialect: Native, Form: Fraction, Count: 1, FractionMilli: 250, Source: []string{"gpuadmit.io/gpu=250m"}},
				{Container: "app", Kind: App, Dialect: NVIDIA, Form: Whole, Count: 1, Source: []string{"nvidia.com/gpu=1"}},
			},
		},
		"a pod without GPU": {
			pod: podOf(ctr("web", "cpu=1", "memory=1Gi")),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, errs := Read(tc.pod)
			if len(errs) > 0 {
				t.Fatalf("Read: unexpected errors: %v", errs)
			}
			if diff := cmp.Diff(tc.want, got.Requests); diff != "" {
				t.Errorf("Read requests (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadNil(t *testing.T) {
	got, errs := Read(nil)
	if diff := cmp.Diff(Pod{}, got); diff != "" || errs != nil {
		t.Errorf("Read(nil) = %v, %v; want empty Pod and no errors (-want +got):\n%s", got, errs, diff)
	}
}

func TestIsGPUResource(t *testing.T) {
	tests := map[corev1.ResourceName]bool{
		"gpuadmit.io/gpu": true, "gpuadmit.io/gpu-memory": true, "gpuadmit.io/gpu-mem": true,
		"nvidia.com/gpu": true, "nvidia.com/gpumem": true, "nvidia.com/gpumem-percentage": true,
		"nvidia.com/gpucores": true, "nvidia.com/mig-1g.10gb": true, "nvidia.com/mig-anything": true,
		"aliyun.com/gpu-mem": true, "volcano.sh/vgpu-number": true, "volcano.sh/vgpu-memory": true,
		"volcano.sh/vgpu-cores": true, "volcano.sh/vgpu-memory-percentage": true, "volcano.sh/gpu-memory": true,
		"volcano.sh/gpu-number": true, "nvidia.com/priority": true, "cpu": false, "memory": false, "nvidia.com/gpu-foo": false,
	}
	for name, want := range tests {
		if got := IsGPUResource(name); got != want {
			t.Errorf("IsGPUResource(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestReadDropsHAMiPriorityWithAWarning: the key is read, so it is not left
// behind, and the warning names the container and the field.
func TestReadDropsHAMiPriorityWithAWarning(t *testing.T) {
	got, errs := Read(podOf(ctr("a", "nvidia.com/gpu=1", "nvidia.com/priority=1")))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := []string{`container "a": spec.containers[0].resources.limits[nvidia.com/priority]=1 is HAMi's task priority; ` +
		`gpuadmit drops it: the pod's PriorityClass (from gpuadmit.io/class) sets its priority`}
	if diff := cmp.Diff(want, got.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}
