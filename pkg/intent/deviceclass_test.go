package intent

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestReadDeviceClassTranslates: gpuadmit's whole-GPU and MIG classes, asked
// for by their implicit extended resource, become the request their
// nvidia.com/* names make, so the policy decides them; a warning says so.
func TestReadDeviceClassTranslates(t *testing.T) {
	tests := map[string]struct {
		pod         *corev1.Pod
		want        []Request
		wantWarning string
	}{
		"the whole-GPU class is whole GPUs": {
			pod: podOf(ctr("train", "deviceclass.resource.kubernetes.io/gpu.gpuadmit.io=8")),
			want: []Request{{Container: "train", Kind: App, Dialect: DeviceClass, Form: Whole, Count: 8,
				Source: []string{"deviceclass.resource.kubernetes.io/gpu.gpuadmit.io=8"}}},
			wantWarning: `container "train": deviceclass.resource.kubernetes.io/gpu.gpuadmit.io=8 is read as nvidia.com/gpu: 8`,
		},
		"requests only": {
			pod: podOf(requesting(ctr("train"), "deviceclass.resource.kubernetes.io/gpu.gpuadmit.io=2")),
			want: []Request{{Container: "train", Kind: App, Dialect: DeviceClass, Form: Whole, Count: 2,
				Source: []string{"deviceclass.resource.kubernetes.io/gpu.gpuadmit.io=2"}}},
			wantWarning: "nvidia.com/gpu: 2",
		},
		"a MIG class is slices of its profile": {
			pod: withInit(podOf(), ctr("prep", "deviceclass.resource.kubernetes.io/mig-1g.10gb.gpuadmit.io=1")),
			want: []Request{{Container: "prep", Kind: Init, Dialect: DeviceClass, Form: Profile, Count: 1, Profile: "1g.10gb",
				Source: []string{"deviceclass.resource.kubernetes.io/mig-1g.10gb.gpuadmit.io=1"}}},
			wantWarning: "nvidia.com/mig-1g.10gb: 1",
		},
		"a MIG class with media extensions": {
			pod: podOf(ctr("a", "deviceclass.resource.kubernetes.io/mig-1g.10gb.me.gpuadmit.io=2")),
			want: []Request{{Container: "a", Kind: App, Dialect: DeviceClass, Form: Profile, Count: 2, Profile: "1g.10gb+me",
				Source: []string{"deviceclass.resource.kubernetes.io/mig-1g.10gb.me.gpuadmit.io=2"}}},
			wantWarning: "nvidia.com/mig-1g.10gb.me: 2",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, errs := Read(tc.pod)
			if len(errs) > 0 {
				t.Fatalf("Read: %v", errs)
			}
			if diff := cmp.Diff(tc.want, got.Requests); diff != "" {
				t.Errorf("Read requests (-want +got):\n%s", diff)
			}
			if len(got.Warnings) != 1 || !strings.Contains(got.Warnings[0], tc.wantWarning) {
				t.Errorf("Read warnings = %q, want one containing %q", got.Warnings, tc.wantWarning)
			}
		})
	}
}

// TestReadDeviceClassDenies: what does not map onto a request is an error
// at the key, naming the container and what to write instead.
func TestReadDeviceClassDenies(t *testing.T) {
	const p = "spec.containers[0].resources.limits[deviceclass.resource.kubernetes.io/"
	tests := map[string]struct {
		pod        *corev1.Pod
		wantField  string
		wantType   field.ErrorType
		wantDetail []string
	}{
		"the share class carries no memory size": {
			pod:       podOf(ctr("infer", "deviceclass.resource.kubernetes.io/gpu-share.gpuadmit.io=1")),
			wantField: p + "gpu-share.gpuadmit.io]", wantType: field.ErrorTypeForbidden,
			wantDetail: []string{`container "infer"`, "take the whole GPU", "gpuadmit.io/gpu-memory: 10Gi", "gpuadmit.io/gpu: 500m"},
		},
		"a name no class of gpuadmit's has": {
			pod:       podOf(ctr("x", "deviceclass.resource.kubernetes.io/tpu.gpuadmit.io=1")),
			wantField: p + "tpu.gpuadmit.io]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "x"`, `"tpu.gpuadmit.io" is not one of gpuadmit's DeviceClasses`, "nvidia.com/gpu", "nvidia.com/mig-<profile>"},
		},
		"a MIG class without a profile": {
			pod:       podOf(ctr("x", "deviceclass.resource.kubernetes.io/mig-big.gpuadmit.io=1")),
			wantField: p + "mig-big.gpuadmit.io]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "x"`, "not one of gpuadmit's DeviceClasses"},
		},
		"capitals name no class and are still refused": {
			pod:       podOf(ctr("x", "deviceclass.resource.kubernetes.io/GPU.GPUADMIT.IO=1")),
			wantField: p + "GPU.GPUADMIT.IO]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "x"`, "nvidia.com/gpu"},
		},
		"zero devices": {
			pod:       podOf(ctr("x", "deviceclass.resource.kubernetes.io/gpu.gpuadmit.io=0")),
			wantField: p + "gpu.gpuadmit.io]", wantType: field.ErrorTypeInvalid,
			wantDetail: []string{`container "x"`, "asks for no GPU"},
		},
		"beside nvidia.com/gpu": {
			pod:       podOf(ctr("x", "deviceclass.resource.kubernetes.io/gpu.gpuadmit.io=1", "nvidia.com/gpu=1")),
			wantField: "spec.containers[0].resources.limits[nvidia.com/gpu]", wantType: field.ErrorTypeForbidden,
			wantDetail: []string{`container "x"`, "two dialects"},
		},
		"two of gpuadmit's classes": {
			pod: podOf(ctr("x", "deviceclass.resource.kubernetes.io/gpu.gpuadmit.io=1",
				"deviceclass.resource.kubernetes.io/mig-1g.10gb.gpuadmit.io=1")),
			wantField: p + "mig-1g.10gb.gpuadmit.io]", wantType: field.ErrorTypeForbidden,
			wantDetail: []string{`container "x"`, "two of gpuadmit's DeviceClasses"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, errs := Read(tc.pod)
			if len(errs) != 1 {
				t.Fatalf("Read: got %d errors, want 1: %v", len(errs), errs)
			}
			if errs[0].Field != tc.wantField || errs[0].Type != tc.wantType {
				t.Errorf("Read error at %s (%s), want %s (%s)", errs[0].Field, errs[0].Type, tc.wantField, tc.wantType)
			}
			for _, want := range tc.wantDetail {
				if !strings.Contains(errs[0].Error(), want) {
					t.Errorf("Read error %q does not contain %q", errs[0].Error(), want)
				}
			}
			if len(got.Requests) != 0 {
				t.Errorf("Read returned a request for a container in error: %v", got.Requests)
			}
		})
	}
}

// TestReadOtherDriversClassesAreNotGPU: another driver's class, by its
// implicit name, is not gpuadmit's to read.
func TestReadOtherDriversClassesAreNotGPU(t *testing.T) {
	for _, k := range []corev1.ResourceName{
		"deviceclass.resource.kubernetes.io/fpga.example.com",
		"deviceclass.resource.kubernetes.io/gpu.nvidia.com",
		"deviceclass.resource.kubernetes.io/gpuadmit.io.example.com",
	} {
		got, errs := Read(podOf(ctr("a", string(k)+"=1")))
		if len(errs) > 0 || got.AsksForGPU() || IsGPUResource(k) {
			t.Errorf("%s: Read = %+v, %v; IsGPUResource %v; want no GPU and no error", k, got, errs, IsGPUResource(k))
		}
	}
	for _, k := range DeviceClassResources() {
		if !IsGPUResource(k) {
			t.Errorf("IsGPUResource(%s) = false, want true", k)
		}
	}
}
