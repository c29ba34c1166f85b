package intent

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestReadErrors(t *testing.T) {
	tests := map[string]struct {
		pod       *corev1.Pod
		wantField string
		wantType  field.ErrorType
		// wantDetail are substrings of the detail: the container and what is accepted.
		wantDetail []string
	}{
		"nvidia.com/gpu: 0": {
			pod:       podOf(ctr("train", "nvidia.com/gpu=0")),
			wantField: "spec.containers[0].resources.limits[nvidia.com/gpu]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "train"`, "asks for no GPU; remove the key or ask for at least 1"},
		},
		"negative count": {
			pod:       podOf(ctr("train", "nvidia.com/gpu=-1")),
			wantField: "spec.containers[0].resources.limits[nvidia.com/gpu]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "train"`, "negative", "accepted: an integer from 1 to 256"},
		},
		"500m where an integer is needed": {
			pod:       podOf(ctr("train", "nvidia.com/gpu=500m")),
			wantField: "spec.containers[0].resources.limits[nvidia.com/gpu]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "train"`, "not an integer", "accepted: an integer from 1 to 256"},
		},
		"count above 256": {
			pod:       podOf(ctr("train", "volcano.sh/vgpu-number=257")),
			wantField: "spec.containers[0].resources.limits[volcano.sh/vgpu-number]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "train"`, "above 256", "accepted: an integer from 1 to 256"},
		},
		"gpumem written in Gi counts MiB": {
			pod:       podOf(ctr("x", "nvidia.com/gpu=1", "nvidia.com/gpumem=3Gi")),
			wantField: "spec.containers[0].resources.limits[nvidia.com/gpumem]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "x"`, "counts MiB", "3Gi (3221225472 bytes) would be 3072", "accepted: an integer from 1 to 1048576"},
		},
		"gpumem and gpumem-percentage together": {
			pod:       podOf(ctr("x", "nvidia.com/gpumem=3000", "nvidia.com/gpumem-percentage=50")),
			wantField: "spec.containers[0].resources.limits[nvidia.com/gpumem-percentage]", wantType: field.ErrorTypeForbidden,
			wantDetail: []string{`container "x"`, "contradictory", "not both"},
		},
		"percentage 101": {
			pod:       podOf(ctr("x", "nvidia.com/gpumem-percentage=101")),
			wantField: "spec.containers[0].resources.limits[nvidia.com/gpumem-percentage]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "x"`, "percentage", "accepted: an integer from 1 to 100"},
		},
		"gpucores 101": {
			pod:       podOf(ctr("x", "nvidia.com/gpucores=101")),
			wantField: "spec.containers[0].resources.limits[nvidia.com/gpucores]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "x"`, "accepted: an integer from 0 to 100"},
		},
		"native 1500m": {
			pod:       podOf(ctr("x", "gpuadmit.io/gpu=1500m")),
			wantField: "spec.containers[0].resources.limits[gpuadmit.io/gpu]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "x"`, "a fraction and a whole GPU", "accepted: an integer number of GPUs", "a fraction below 1 such as 500m"},
		},
		"native count above 256": {
			pod:       podOf(ctr("x", "gpuadmit.io/gpu=1e100")),
			wantField: "spec.containers[0].resources.limits[gpuadmit.io/gpu]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "x"`, "above 256 GPUs", "accepted: an integer number of GPUs"},
		},
		"native memory with a fraction": {
			pod:       podOf(ctr("x", "gpuadmit.io/gpu=500m", "gpuadmit.io/gpu-memory=4Gi")),
			wantField: "spec.containers[0].resources.limits[gpuadmit.io/gpu-memory]", wantType: field.ErrorTypeForbidden,
			wantDetail: []string{`container "x"`, "contradictory", "ask for a fraction or for memory, not both"},
		},
		"native memory as a bare number": {
			pod:       podOf(ctr("x", "gpuadmit.io/gpu-memory=3000")),
			wantField: "spec.containers[0].resources.limits[gpuadmit.io/gpu-memory]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "x"`, "3000 is 3000 bytes, below 1Mi; write 3000Mi", "accepted: a byte quantity"},
		},
		"native memory above 1Ti": {
			pod:       podOf(ctr("x", "gpuadmit.io/gpu-memory=2Ti")),
			wantField: "spec.containers[0].resources.limits[gpuadmit.io/gpu-memory]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "x"`, "above 1Ti", "accepted: a byte quantity"},
		},
		"two dialects": {
			pod:       podOf(ctr("x", "gpuadmit.io/gpu=1", "aliyun.com/gpu-mem=4")),
			wantField: "spec.containers[0].resources.limits[gpuadmit.io/gpu]", wantType: field.ErrorTypeForbidden,
			wantDetail: []string{`container "x" asks for GPU in two dialects (gpushare: aliyun.com/gpu-mem=4; native: gpuadmit.io/gpu=1); use one`},
		},
		"nvidia.com/gpu with a MIG slice": {
			pod:       podOf(ctr("x", "nvidia.com/gpu=1", "nvidia.com/mig-1g.10gb=1")),
			wantField: "spec.containers[0].resources.limits[nvidia.com/mig-1g.10gb]", wantType: field.ErrorTypeForbidden,
			wantDetail: []string{`container "x" asks for GPU in two dialects (nvidia: nvidia.com/gpu=1; mig: nvidia.com/mig-1g.10gb=1); use one`},
		},
		"nvidia.com/gpu with nvidia.com/gpu.shared": {
			pod:       podOf(ctr("x", "nvidia.com/gpu=1", "nvidia.com/gpu.shared=1")),
			wantField: "spec.containers[0].resources.limits[nvidia.com/gpu.shared]", wantType: field.ErrorTypeForbidden,
			wantDetail: []string{`container "x" asks for GPU in two dialects (nvidia: nvidia.com/gpu=1; nvidia-shared: nvidia.com/gpu.shared=1); use one`},
		},
		"nvidia.com/gpu.shared: 0": {
			pod:       podOf(ctr("x", "nvidia.com/gpu.shared=0")),
			wantField: "spec.containers[0].resources.limits[nvidia.com/gpu.shared]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "x"`, "asks for no GPU"},
		},
		"nvidia.com/gpu.shared against backend whole": {
			pod:       annotated(podOf(ctr("x", "nvidia.com/gpu.shared=2")), "gpuadmit.io/backend=whole"),
			wantField: "spec.containers[0].resources.limits[nvidia.com/gpu.shared]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "x": nvidia.com/gpu.shared asks for time-sliced replicas, but gpuadmit.io/backend is "whole"`,
				`accepted: nvidia.com/gpu.shared with gpuadmit.io/backend unset or "time-sliced", or nvidia.com/gpu: N for whole GPUs`},
		},
		"nvidia.com/gpu.shared in requests against backend shared": {
			pod:       annotated(withInit(podOf(ctr("a")), requesting(ctr("warm"), "nvidia.com/gpu.shared=1")), "gpuadmit.io/backend=shared"),
			wantField: "spec.initContainers[0].resources.requests[nvidia.com/gpu.shared]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "warm"`, `gpuadmit.io/backend is "shared"`, "gpuadmit.io/gpu-mem: N (GiB) for a memory share"},
		},
		"nvidia.com/gpu.shared against HAMi's MIG mode": {
			pod:       annotated(podOf(ctr("x", "nvidia.com/gpu.shared=1")), "nvidia.com/vgpu-mode=mig"),
			wantField: "spec.containers[0].resources.limits[nvidia.com/gpu.shared]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "x"`, `nvidia.com/vgpu-mode is "mig", which asks for MIG`, "nvidia.com/mig-<profile>: N for MIG slices"},
		},
		"volcano and hami": {
			pod:       podOf(ctr("x", "nvidia.com/gpumem=1000", "volcano.sh/vgpu-memory=1000")),
			wantField: "spec.containers[0].resources.limits[volcano.sh/vgpu-memory]", wantType: field.ErrorTypeForbidden,
			wantDetail: []string{`container "x" asks for GPU in two dialects (hami: nvidia.com/gpumem=1000; volcano: volcano.sh/vgpu-memory=1000); use one`},
		},
		"two MIG profiles": {
			pod:       podOf(ctr("x", "nvidia.com/mig-1g.10gb=1", "nvidia.com/mig-3g.40gb=1")),
			wantField: "spec.containers[0].resources.limits[nvidia.com/mig-3g.40gb]", wantType: field.ErrorTypeForbidden,
			wantDetail: []string{`container "x"`, "ask for one MIG profile per container"},
		},
		"zero MIG slices": {
			pod:       podOf(ctr("x", "nvidia.com/mig-2g.20gb=0")),
			wantField: "spec.containers[0].resources.limits[nvidia.com/mig-2g.20gb]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "x"`, "asks for no GPU"},
		},
		"a malformed MIG profile": {
			pod:       podOf(ctr("x", "nvidia.com/mig-big=1")),
			wantField: "spec.containers[0].resources.limits[nvidia.com/mig-big]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "x"`, "not a MIG profile", "accepted: nvidia.com/mig-<compute>g.<memory>gb"},
		},
		"requests and limits differ": {
			pod:       withInit(podOf(ctr("a")), requesting(ctr("warm", "nvidia.com/gpu=2"), "nvidia.com/gpu=1")),
			wantField: "spec.initContainers[0].resources.requests[nvidia.com/gpu]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "warm"`, "requests and limits of nvidia.com/gpu differ (1 vs 2); GPU resources need requests equal to limits"},
		},
		"zero in requests only": {
			pod:       withInit(podOf(ctr("a")), requesting(ctr("warm"), "nvidia.com/gpu=0")),
			wantField: "spec.initContainers[0].resources.requests[nvidia.com/gpu]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "warm"`, "asks for no GPU"},
		},
		"gpu-mem in GiB above 1 TiB": {
			pod:       podOf(ctr("x", "aliyun.com/gpu-mem=2000")),
			wantField: "spec.containers[0].resources.limits[aliyun.com/gpu-mem]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "x"`, "counts GiB", "accepted: an integer from 1 to 1024"},
		},
		"kai fraction abc": {
			pod:       annotated(podOf(ctr("main")), "gpu-fraction=abc"),
			wantField: "metadata.annotations[gpu-fraction]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "main"`, "accepted: a decimal above 0 and at most 1"},
		},
		"kai fraction 0": {
			pod:       annotated(podOf(ctr("main")), "gpu-fraction=0"),
			wantField: "metadata.annotations[gpu-fraction]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "main"`, "accepted: a decimal above 0 and at most 1"},
		},
		"kai fraction 1.5": {
			pod:       annotated(podOf(ctr("main")), "gpu-fraction=1.5"),
			wantField: "metadata.annotations[gpu-fraction]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "main"`, "accepted: a decimal above 0 and at most 1"},
		},
		"kai fraction negative": {
			pod:       annotated(podOf(ctr("main")), "gpu-fraction=-0.5"),
			wantField: "metadata.annotations[gpu-fraction]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "main"`, "accepted: a decimal above 0 and at most 1"},
		},
		"kai fraction empty": {
			pod:       annotated(podOf(ctr("main")), "gpu-fraction="),
			wantField: "metadata.annotations[gpu-fraction]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "main"`, "accepted: a decimal above 0 and at most 1"},
		},
		"kai memory not a number": {
			pod:       annotated(podOf(ctr("main")), "gpu-memory=4Gi"),
			wantField: "metadata.annotations[gpu-memory]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "main"`, "accepted: an integer number of MiB per GPU"},
		},
		"kai fraction with memory": {
			pod:       annotated(podOf(ctr("main")), "gpu-fraction=0.5", "gpu-memory=1000"),
			wantField: "metadata.annotations[gpu-memory]", wantType: field.ErrorTypeForbidden,
			wantDetail: []string{`container "main"`, "contradictory", "not both"},
		},
		"kai container name matches nothing": {
			pod:       annotated(withInit(podOf(ctr("a"), ctr("b")), ctr("i")), "gpu-fraction=0.5", "gpu-fraction-container-name=c"),
			wantField: "metadata.annotations[gpu-fraction-container-name]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`no container or init container is named "c"`, `accepted: one of "i", "a", "b"`},
		},
		"kai num-devices alone": {
			pod:       annotated(podOf(ctr("main")), "gpu-fraction-num-devices=2"),
			wantField: "metadata.annotations[gpu-fraction-num-devices]", wantType: field.ErrorTypeForbidden,
			wantDetail: []string{"only meaningful with gpu-fraction or gpu-memory"},
		},
		"kai num-devices 0": {
			pod:       annotated(podOf(ctr("main")), "gpu-memory=100", "gpu-fraction-num-devices=0"),
			wantField: "metadata.annotations[gpu-fraction-num-devices]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "main"`, "asks for no GPU"},
		},
		"kai on a container with nvidia.com/gpu": {
			pod:       annotated(podOf(ctr("main", "nvidia.com/gpu=1")), "gpu-fraction=0.5"),
			wantField: "spec.containers[0].resources.limits[nvidia.com/gpu]", wantType: field.ErrorTypeForbidden,
			wantDetail: []string{`container "main" asks for GPU in two dialects (kai: annotation gpu-fraction=0.5; nvidia: nvidia.com/gpu=1); use one`},
		},
		"class label and annotation differ": {
			pod:       annotated(labeled(podOf(ctr("a")), "gpuadmit.io/class=training"), "gpuadmit.io/class=batch"),
			wantField: "metadata.annotations[gpuadmit.io/class]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`label gpuadmit.io/class is "training" but the annotation says "batch"`},
		},
		"class not a DNS label": {
			pod:       labeled(podOf(ctr("a")), "gpuadmit.io/class=Training"),
			wantField: "metadata.labels[gpuadmit.io/class]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{"accepted: a DNS-1123 label"},
		},
		"bad backend": {
			pod:       annotated(podOf(ctr("a")), "gpuadmit.io/backend=fast"),
			wantField: "metadata.annotations[gpuadmit.io/backend]", wantType: field.ErrorTypeNotSupported,
			wantDetail: []string{`supported values: "mig", "shared", "whole", "time-sliced"`},
		},
		"empty model": {
			pod:       annotated(podOf(ctr("a")), "gpuadmit.io/model="),
			wantField: "metadata.annotations[gpuadmit.io/model]", wantType: field.ErrorTypeRequired,
			wantDetail: []string{"name a GPU model"},
		},
		"model not a label value": {
			pod:       annotated(podOf(ctr("a")), "gpuadmit.io/model=H100 80GB"),
			wantField: "metadata.annotations[gpuadmit.io/model]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{"accepted: a GPU model"},
		},
		"hami priority alone asks for no GPU": {
			pod:       podOf(ctr("x", "nvidia.com/priority=0")),
			wantField: "spec.containers[0].resources.limits[nvidia.com/priority]", wantType: field.ErrorTypeForbidden,
			wantDetail: []string{`container "x"`, "asks for no GPU; remove it"},
		},
		"hami priority out of range": {
			pod:       podOf(ctr("x", "nvidia.com/gpu=1", "nvidia.com/priority=5")),
			wantField: "spec.containers[0].resources.limits[nvidia.com/priority]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "x"`, "0 (high) or 1 (low)", "accepted: an integer from 0 to 1"},
		},
		"volcano's older share and whole GPUs together": {
			pod:       podOf(ctr("x", "volcano.sh/gpu-memory=1024", "volcano.sh/gpu-number=1")),
			wantField: "spec.containers[0].resources.limits[volcano.sh/gpu-number]", wantType: field.ErrorTypeForbidden,
			wantDetail: []string{`container "x"`, "contradictory", "not both"},
		},
		"volcano memory and percentage together": {
			pod:       podOf(ctr("x", "volcano.sh/vgpu-memory=1024", "volcano.sh/vgpu-memory-percentage=50")),
			wantField: "spec.containers[0].resources.limits[volcano.sh/vgpu-memory-percentage]", wantType: field.ErrorTypeForbidden,
			wantDetail: []string{`container "x"`, "contradictory"},
		},
		"use-gputype naming no type": {
			pod:       annotated(podOf(ctr("a", "nvidia.com/gpu=1")), "nvidia.com/use-gputype= , "),
			wantField: "metadata.annotations[nvidia.com/use-gputype]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{"names no GPU type", "accepted: GPU types separated by commas"},
		},
		"an unknown vgpu-mode": {
			pod:       annotated(podOf(ctr("a", "nvidia.com/gpu=1")), "nvidia.com/vgpu-mode=vgpu"),
			wantField: "metadata.annotations[nvidia.com/vgpu-mode]", wantType: field.ErrorTypeNotSupported,
			wantDetail: []string{`"mig"`, `"hami-core"`, `"mps"`},
		},
		"vgpu-mode mig against backend shared": {
			pod:       annotated(podOf(ctr("a", "volcano.sh/vgpu-number=1")), "volcano.sh/vgpu-mode=mig", "gpuadmit.io/backend=shared"),
			wantField: "metadata.annotations[volcano.sh/vgpu-mode]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{"asks for MIG", `gpuadmit.io/backend is "shared"`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, errs := Read(tc.pod)
			if len(errs) != 1 {
				t.Fatalf("Read: got %d errors, want 1: %v", len(errs), errs)
			}
			type summary struct {
				Field string
				Type  field.ErrorType
			}
			if diff := cmp.Diff(summary{tc.wantField, tc.wantType}, summary{errs[0].Field, errs[0].Type}); diff != "" {
				t.Errorf("Read error (-want +got):\n%s", diff)
			}
			msg := errs[0].Error()
			for _, want := range tc.wantDetail {
				if !strings.Contains(msg, want) {
					t.Errorf("Read error %q does not contain %q", msg, want)
				}
			}
			if len(got.Requests) != 0 && strings.HasPrefix(tc.wantField, "spec.") {
				t.Errorf("Read returned a request for a container in error: %v", got.Requests)
			}
		})
	}
}

func TestReadCollectsEveryError(t *testing.T) {
	pod := annotated(podOf(ctr("a", "nvidia.com/gpu=0"), ctr("b", "nvidia.com/gpumem-percentage=101"), ctr("c", "nvidia.com/gpu=1")),
		"gpuadmit.io/backend=fast")
	got, errs := Read(pod)
	var fields []string
	for _, e := range errs {
		fields = append(fields, e.Field)
	}
	want := []string{
		"metadata.annotations[gpuadmit.io/backend]",
		"spec.containers[0].resources.limits[nvidia.com/gpu]",
		"spec.containers[1].resources.limits[nvidia.com/gpumem-percentage]",
	}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("Read error fields (-want +got):\n%s", diff)
	}
	if len(got.Requests) != 1 || got.Requests[0].Container != "c" {
		t.Errorf("Read requests = %v, want only container c", got.Requests)
	}
}
