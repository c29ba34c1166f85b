package scale

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// TestFleetBuildsEveryKindOfPool builds the inventory of a small fleet as
// the webhook does (Nodes and gpuadmit's ResourceSlices): the six
// device-plugin pools and a DRA pool of each DRA kind, every node in a
// pool, and no node refused.
func TestFleetBuildsEveryKindOfPool(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	f, err := fleet(root, 40, 5)
	if err != nil {
		t.Fatal(err)
	}
	var nodes []corev1.Node
	var rs []resourceapi.ResourceSlice
	for _, g := range f {
		nodes = append(nodes, g.node)
		rs = append(rs, g.slices...)
		if len(g.node.Labels) < 50 {
			t.Errorf("node %s has %d labels, want the kubelet's, GFD's and NFD's (at least 50)", g.node.Name, len(g.node.Labels))
		}
	}
	inv := inventory.BuildWithSlices(nodes, rs, allocator.Default())
	if len(inv.Warnings) > 0 {
		t.Errorf("warnings: %v", inv.Warnings)
	}
	var dra []string
	inPools := 0
	for _, p := range inv.Pools {
		inPools += len(p.Nodes)
		if p.DRA {
			dra = append(dra, p.Product)
		}
	}
	slices.Sort(dra)
	if diff := cmp.Diff([]string{"NVIDIA-H100-80GB-HBM3", "NVIDIA-H200"}, dra); diff != "" {
		t.Errorf("DRA pools by product (-want +got):\n%s", diff)
	}
	if got := len(inv.Pools) - len(dra); got != 6 {
		t.Errorf("%d device-plugin pools, want bench/admission's 6", got)
	}
	if inPools != len(nodes) {
		t.Errorf("%d of %d nodes in pools", inPools, len(nodes))
	}
}

// TestFleetGrowsByItsPrefix: a step adds the nodes past the last step's,
// so a smaller fleet must be the larger one's prefix.
func TestFleetGrowsByItsPrefix(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	small, err := fleet(root, 25, 5)
	if err != nil {
		t.Fatal(err)
	}
	large, err := fleet(root, 60, 5)
	if err != nil {
		t.Fatal(err)
	}
	for i := range small {
		if diff := cmp.Diff(small[i].node, large[i].node); diff != "" {
			t.Fatalf("node %d differs (-25 nodes +60 nodes):\n%s", i, diff)
		}
	}
}

func TestMemStats(t *testing.T) {
	profile := []byte("heap profile: 1: 2 [3: 4] @ heap/1048576\n1: 2 [3: 4] @ 0x1\n\n# runtime.MemStats\n# Alloc = 12345\n# HeapAlloc = 12345\n# HeapInuse = 20480\n# Sys = 99999\n# PauseNs = [1 2 3]\n")
	got := memStats(profile)
	want := map[string]float64{"Alloc": 12345, "HeapAlloc": 12345, "HeapInuse": 20480, "Sys": 99999}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestStatusMB(t *testing.T) {
	status := []byte("Name:\tgpuadmit\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n")
	for field, want := range map[string]float64{"VmRSS": 104.8576, "VmHWM": 209.7152} {
		got, err := statusMB(status, field)
		if err != nil || got != want {
			t.Errorf("%s: %v, %v; want %v", field, got, err, want)
		}
	}
	if _, err := statusMB(status, "VmSwap"); err == nil {
		t.Error("VmSwap: no error for a missing field")
	}
}

// TestFormulaAtTheChartsDefault checks the formula's terms against
// docs/scale.md's first rows: 1,000 GPU nodes, all DRA nodes, and 20,000
// GPU pods are, for a serving replica, 145 MB of heap, 392 MB typical and
// 435 MB peak RSS, and for the controller 180, 487 and 540 MB; the
// requests and limits the chart and deploy/base set (384Mi and 544Mi,
// 480Mi and 672Mi) are the typical RSS and the peak over 0.8, rounded up
// to 32 MiB.
func TestFormulaAtTheChartsDefault(t *testing.T) {
	for part, c := range map[string]struct {
		f                    Formula
		heap, typical, peak  float64
		requestMiB, limitMiB float64
	}{
		"webhook":    {formulaOf(1000, 1000, 20000), 145, 392, 435, 384, 544},
		"controller": {controllerFormulaOf(1000, 1000, 20000), 180, 487, 540, 480, 672},
	} {
		for name, v := range map[string][2]float64{"heap": {c.f.HeapMB, c.heap}, "typical": {c.f.RSSTypicalMB, c.typical}, "peak": {c.f.RSSPeakMB, c.peak}} {
			if v[0] < v[1]-1.5 || v[0] > v[1]+1.5 {
				t.Errorf("%s: %s %.1f MB, docs/scale.md says %.0f", part, name, v[0], v[1])
			}
		}
		mib := func(mb float64) float64 { return mb * 1e6 / (1 << 20) }
		if got := mib(c.f.RSSTypicalMB); got > c.requestMiB || got < c.requestMiB-32 {
			t.Errorf("%s: the typical RSS is %.0f MiB; the request of %.0fMi is that rounded up to 32 MiB", part, got, c.requestMiB)
		}
		if got := mib(c.f.RSSPeakMB / 0.8); got > c.limitMiB || got < c.limitMiB-32 {
			t.Errorf("%s: the peak over 0.8 is %.0f MiB; the limit of %.0fMi is that rounded up to 32 MiB", part, got, c.limitMiB)
		}
	}
}
