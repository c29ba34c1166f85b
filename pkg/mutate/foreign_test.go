package mutate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/intent"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

// TestForeignHints: HAMi's and Volcano's pod annotations narrow the pools as
// their schedulers would, or come back as warnings that name them.
func TestForeignHints(t *testing.T) {
	m := NewMutator(defaultEngine, StaticInventory{Inv: exampleInventory(t)}, MutatorOptions{})
	hami := map[string]string{"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}
	tests := map[string]struct {
		ann       map[string]string
		limits    map[string]string
		wantPool  string
		wantWarns []string // substrings, one warning each
	}{
		"no hint: the smallest slice that covers":   {limits: hami, wantPool: "a100-40gb-mig-1g.5gb"},
		"use-gputype H200 keeps only the H200 pool": {ann: map[string]string{"nvidia.com/use-gputype": "H200"}, limits: hami, wantPool: "h200-141gb-mig-mixed"},
		"nouse-gputype drops the A100 pools":        {ann: map[string]string{"nvidia.com/nouse-gputype": "A100"}, limits: hami, wantPool: "h100-inference"},
		"HAMi's vgpu-mode mig makes a whole GPU a full slice": {ann: map[string]string{"nvidia.com/vgpu-mode": "mig"},
			limits: map[string]string{"nvidia.com/gpu": "1"}, wantPool: "h100-inference"},
		"Volcano's vgpu-mode mig too": {ann: map[string]string{"volcano.sh/vgpu-mode": "mig"},
			limits: map[string]string{"volcano.sh/vgpu-number": "1"}, wantPool: "h100-inference"},
		"a UUID pin is a warning naming the key": {ann: map[string]string{"nvidia.com/use-gpuuuid": "GPU-03f69c50"}, limits: hami,
			wantPool: "a100-40gb-mig-1g.5gb", wantWarns: []string{"metadata.annotations[nvidia.com/use-gpuuuid]"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := pod("p", tc.limits)
			p.Annotations = tc.ann
			res := mustMutate(t, m, p)
			if !res.Allowed {
				t.Fatalf("denied: %s", res.Message)
			}
			if got := res.Pod.Annotations[record.AnnotationDecision]; !strings.Contains(got, "pool "+tc.wantPool+";") {
				t.Errorf("decision %q, want pool %s", got, tc.wantPool)
			}
			var got []string
			for _, w := range res.Warnings {
				for _, want := range tc.wantWarns {
					if strings.Contains(w, want) {
						got = append(got, want)
					}
				}
			}
			if diff := cmp.Diff(tc.wantWarns, got); diff != "" {
				t.Errorf("warnings %q (-want +got):\n%s", res.Warnings, diff)
			}
			if tc.wantWarns != nil && !strings.Contains(res.Explanation, tc.wantWarns[0]) {
				t.Errorf("explanation does not carry the warning: %s", res.Explanation)
			}
		})
	}
}

// TestForeignTypesThatLeaveNoPool: the denial lists each pool's model and product.
func TestForeignTypesThatLeaveNoPool(t *testing.T) {
	m := NewMutator(defaultEngine, StaticInventory{Inv: exampleInventory(t)}, MutatorOptions{})
	p := pod("p", map[string]string{"nvidia.com/gpu": "1"})
	p.Annotations = map[string]string{"nvidia.com/use-gputype": "V100"}
	res := mustMutate(t, m, p)
	if res.Allowed {
		t.Fatal("allowed, want a denial")
	}
	for _, want := range []string{`nvidia.com/use-gputype "V100"`, "t4-shared (model T4, product Tesla-T4)"} {
		if !strings.Contains(res.Message, want) {
			t.Errorf("message %q does not say %q", res.Message, want)
		}
	}
}

// TestNoDialectKeyLeftBehind: every key of a dialect gpuadmit reads is
// translated away; the rewritten pod carries only the resources gpuadmit
// writes, which nodes advertise. A key left behind keeps a pod Pending forever.
func TestNoDialectKeyLeftBehind(t *testing.T) {
	m := NewMutator(defaultEngine, StaticInventory{Inv: exampleInventory(t)}, MutatorOptions{})
	tests := map[string]map[string]string{
		"HAMi with priority":          {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000", "nvidia.com/gpucores": "30", "nvidia.com/priority": "0"},
		"HAMi percentage":             {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "40"},
		"Volcano memory":              {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "3000", "volcano.sh/vgpu-cores": "50"},
		"Volcano memory percentage":   {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory-percentage": "50"},
		"Volcano's older share":       {"volcano.sh/gpu-memory": "1024"},
		"Volcano's older whole GPUs":  {"volcano.sh/gpu-number": "1"},
		"gpushare":                    {"aliyun.com/gpu-mem": "2"},
		"native memory":               {"gpuadmit.io/gpu-memory": "10Gi"},
		"native fraction":             {"gpuadmit.io/gpu": "250m"},
		"NVIDIA whole GPUs":           {"nvidia.com/gpu": "2"},
		"a MIG profile":               {"nvidia.com/mig-1g.10gb": "1"},
		"a share in gpuadmit's units": {"gpuadmit.io/gpu-mem": "2"},
		"gpuadmit's whole-GPU class":  {"deviceclass.resource.kubernetes.io/gpu.gpuadmit.io": "1"},
		"gpuadmit's MIG class":        {"deviceclass.resource.kubernetes.io/mig-1g.10gb.gpuadmit.io": "1"},
	}
	for name, limits := range tests {
		t.Run(name, func(t *testing.T) {
			p := pod("p", limits)
			p.Spec.Containers[0].Resources.Requests = list(limits)
			res := mustMutate(t, m, p)
			if !res.Allowed {
				t.Fatalf("denied: %s", res.Message)
			}
			if left := leftBehind(res.Pod.Spec.Containers[0]); len(left) > 0 {
				t.Errorf("the rewritten pod still carries %v (limits %v)", left, res.Pod.Spec.Containers[0].Resources.Limits)
			}
		})
	}
}

// leftBehind lists the container's resources that are a dialect's keys but
// not what gpuadmit writes: nvidia.com/gpu, nvidia.com/mig-*, its share and
// accounting resources.
func leftBehind(c corev1.Container) []string {
	written := func(k string) bool {
		return k == "nvidia.com/gpu" || strings.HasPrefix(k, intent.ResourceMIGPrefix) ||
			k == string(intent.ResourceShareMemory) || inventory.IsAccountingResource(k)
	}
	var out []string
	for _, l := range []corev1.ResourceList{c.Resources.Limits, c.Resources.Requests} {
		for k := range l {
			foreign := strings.HasPrefix(string(k), "nvidia.com/") || strings.HasPrefix(string(k), "volcano.sh/") ||
				strings.HasPrefix(string(k), "aliyun.com/") || strings.HasPrefix(string(k), "gpuadmit.io/") ||
				strings.HasPrefix(string(k), intent.ResourceDeviceClassPrefix)
			if foreign && !written(string(k)) {
				out = append(out, string(k))
			}
		}
	}
	return out
}
