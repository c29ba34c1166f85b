package dra

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// apiServer starts kube-apiserver and etcd from the e2e binaries
// (hack/e2e-binaries.sh), skipping when they are missing unless
// GPUADMIT_REQUIRE_E2E is set, as test/e2e does.
func apiServer(t *testing.T) kubernetes.Interface {
	t.Helper()
	bin := os.Getenv("GPUADMIT_E2E_BIN")
	if bin == "" {
		bin, _ = filepath.Abs("../../../test/e2e/.bin/v1.37.0")
	}
	if _, err := os.Stat(filepath.Join(bin, "kube-apiserver")); err != nil {
		if os.Getenv("GPUADMIT_REQUIRE_E2E") != "" {
			t.Fatalf("control-plane binaries missing in %s (run hack/e2e-binaries.sh): %v", bin, err)
		}
		t.Skipf("control-plane binaries missing in %s; hack/e2e-binaries.sh builds them", bin)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: bin}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start kube-apiserver: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	return kubernetes.NewForConfigOrDie(cfg)
}

// layouts are MIG layouts per catalog model: every profile once, on GPUs
// of their own, so every profile name and size goes through validation.
func layouts(m allocator.Model) []allocator.NodeGPU {
	gpus := []allocator.NodeGPU{wholeGPU(m, 0), wholeGPU(m, 1)}
	for i, p := range m.Profiles {
		gpus = append(gpus, migGPU(m, 2+i, p.Name))
	}
	if len(m.Profiles) > 0 { // a full GPU of the smallest profile
		smallest := make([]string, m.Profiles[0].MaxInstances)
		for i := range smallest {
			smallest[i] = m.Profiles[0].Name
		}
		gpus = append(gpus, migGPU(m, 2+len(m.Profiles), smallest...))
	}
	return gpus
}

// TestSlicesPassAPIServerValidation creates the ResourceSlice of a node of
// every catalog model, whole and with MIG instances, in a real API server:
// its validation of names, attributes and the capacity request policy is
// the judge, not a copy of its rules.
func TestSlicesPassAPIServerValidation(t *testing.T) {
	cs := apiServer(t)
	ctx := context.Background()
	for _, m := range allocator.Default().Models() {
		for _, unit := range []int64{0, 4096} {
			t.Run(fmt.Sprintf("%s/unit-%d", m.Name, unit), func(t *testing.T) {
				gpus := layouts(m)
				node := strings.ToLower(m.Name)
				slice := &resourceapi.ResourceSlice{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", node, unit)},
					Spec: resourceapi.ResourceSliceSpec{
						Driver: DriverName, NodeName: &node,
						Pool:    resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1},
						Devices: Devices(gpus, DeviceOptions{ShareUnitMiB: unit, MIGUUIDs: migUUIDs(gpus...)}),
					},
				}
				got, err := cs.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{})
				if err != nil {
					t.Fatalf("API server refused the slice: %v", err)
				}
				// The API server drops fields of disabled features silently; a
				// dropped request policy would make every claim exclusive.
				for i, d := range got.Spec.Devices {
					if want := slice.Spec.Devices[i]; policyOf(d) != policyOf(want) {
						t.Errorf("device %s stored as %+v, sent %+v", d.Name, policyOf(d), policyOf(want))
					}
				}
			})
		}
	}
}
