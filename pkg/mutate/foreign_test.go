package mutate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
			if got := res.Pod.Annotations[AnnotationDecision]; !strings.Contains(got, "pool "+tc.wantPool+";") {
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
