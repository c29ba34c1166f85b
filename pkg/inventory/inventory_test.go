package inventory_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

const h100 = "NVIDIA-H100-80GB-HBM3"

// poolView is the part of a pool a test states, in a form that diffs well.
type poolView struct {
	Model        string
	Mode         inventory.Mode
	Resource     string
	GPUMemoryMiB int64
	UnitsPerGPU  int64
	Profiles     []string // "<name> <MiB> <resource>", in the pool's order
	NodeSelector map[string]string
	Taints       []string
	Allocatable  map[string]int64
	Nodes        []string
}

func view(inv *inventory.Inventory) map[string]poolView {
	out := map[string]poolView{}
	for _, p := range inv.Pools {
		v := poolView{
			Model: p.Model, Mode: p.Mode, Resource: p.Resource, GPUMemoryMiB: p.GPUMemoryMiB,
			UnitsPerGPU: p.UnitsPerGPU(), NodeSelector: p.NodeSelector, Allocatable: p.Allocatable,
		}
		for _, pr := range p.Profiles {
			v.Profiles = append(v.Profiles, fmt.Sprintf("%s %d %s", pr.Name, pr.MemoryMiB, pr.Resource))
		}
		for _, t := range p.Taints {
			v.Taints = append(v.Taints, fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect))
		}
		for _, n := range p.Nodes {
			v.Nodes = append(v.Nodes, n.Name)
		}
		out[p.Name] = v
	}
	return out
}

func exampleNodes(t testing.TB) []corev1.Node {
	t.Helper()
	return readNodes(t, "../../examples/nodes.yaml")
}

// readNodes reads a YAML stream of Node objects from path.
func readNodes(t testing.TB, path string) []corev1.Node {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	nodes, err := inventory.ReadNodes(f)
	if err != nil {
		t.Fatalf("ReadNodes: %v", err)
	}
	return nodes
}

func node(name string, labels map[string]string, alloc map[string]string, taints ...corev1.Taint) corev1.Node {
	rl := corev1.ResourceList{}
	for r, q := range alloc {
		rl[corev1.ResourceName(r)] = resource.MustParse(q)
	}
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status:     corev1.NodeStatus{Allocatable: rl, Capacity: rl},
	}
}

func taint(key, value string, effect corev1.TaintEffect) corev1.Taint {
	return corev1.Taint{Key: key, Value: value, Effect: effect}
}

// acc adds the accounting capacity the example nodes advertise.
func acc(alloc map[string]int64, model string, mib int64) map[string]int64 {
	alloc["gpuadmit.io/gpu-memory-mib"], alloc["gpuadmit.io/"+model+"-mib"] = mib, mib
	return alloc
}

func TestBuildExampleCluster(t *testing.T) {
	inv := inventory.Build(exampleNodes(t), allocator.Default())
	gpuTaint := "nvidia.com/gpu=present:NoSchedule"
	want := map[string]poolView{
		"a100-40gb-mig-1g.5gb": {
			Model: "A100-40GB", Mode: inventory.MIGSingle, Resource: "nvidia.com/gpu", GPUMemoryMiB: 40960,
			Profiles:     []string{"1g.5gb 4864 nvidia.com/gpu"},
			NodeSelector: map[string]string{inventory.LabelProduct: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", inventory.LabelMIGStrategy: "single"},
			Taints:       []string{gpuTaint}, Allocatable: acc(map[string]int64{"nvidia.com/gpu": 56}, "a100-40gb", 272384), Nodes: []string{"a100-single-0"},
		},
		"a100-80gb-whole": {
			Model: "A100-80GB", Mode: inventory.Whole, Resource: "nvidia.com/gpu", GPUMemoryMiB: 81920,
			NodeSelector: map[string]string{inventory.LabelProduct: "NVIDIA-A100-SXM4-80GB"},
			Taints:       []string{gpuTaint}, Allocatable: acc(map[string]int64{"nvidia.com/gpu": 8}, "a100-80gb", 655360), Nodes: []string{"a100-80g-0"},
		},
		"h100-inference": {
			Model: "H100-80GB", Mode: inventory.MIGMixed, GPUMemoryMiB: 81559,
			Profiles: []string{
				"1g.10gb 9984 nvidia.com/mig-1g.10gb", "1g.20gb 20096 nvidia.com/mig-1g.20gb",
				"3g.40gb 40448 nvidia.com/mig-3g.40gb", "7g.80gb 81152 nvidia.com/mig-7g.80gb",
			},
			NodeSelector: map[string]string{inventory.LabelPool: "h100-inference"},
			Taints:       []string{"dedicated=inference:NoSchedule", gpuTaint},
			Allocatable: acc(map[string]int64{
				"nvidia.com/mig-1g.10gb": 42, "nvidia.com/mig-1g.20gb": 8, "nvidia.com/mig-3g.40gb": 8, "nvidia.com/mig-7g.80gb": 2,
			}, "h100-80gb", 624640+441344),
			Nodes: []string{"h100-mig-0", "h100-mig-1"},
		},
		"h200-141gb-mig-mixed": {
			Model: "H200-141GB", Mode: inventory.MIGMixed, GPUMemoryMiB: 143771,
			Profiles: []string{
				"1g.18gb 16384 nvidia.com/mig-1g.18gb", "2g.35gb 33280 nvidia.com/mig-2g.35gb",
				"3g.71gb 71424 nvidia.com/mig-3g.71gb", "7g.141gb 143360 nvidia.com/mig-7g.141gb",
			},
			NodeSelector: map[string]string{inventory.LabelProduct: "NVIDIA-H200", inventory.LabelMIGStrategy: "mixed"},
			Taints:       []string{gpuTaint},
			Allocatable: acc(map[string]int64{
				"nvidia.com/mig-1g.18gb": 28, "nvidia.com/mig-2g.35gb": 6, "nvidia.com/mig-3g.71gb": 4, "nvidia.com/mig-7g.141gb": 1,
			}, "h200-141gb", 1087488),
			Nodes: []string{"h200-mig-0"},
		},
		"t4-shared": {
			Model: "T4", Mode: inventory.Shared, Resource: "gpuadmit.io/gpu-mem", GPUMemoryMiB: 15360, UnitsPerGPU: 4,
			NodeSelector: map[string]string{inventory.LabelProduct: "Tesla-T4"},
			Allocatable:  acc(map[string]int64{"gpuadmit.io/gpu-mem": 16}, "t4", 61440), Nodes: []string{"t4-shared-0"},
		},
	}
	if diff := cmp.Diff(want, view(inv)); diff != "" {
		t.Errorf("pools (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string(nil), inv.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if p, _ := inv.Pool("t4-shared"); p.ShareUnitMiB != 3840 {
		t.Errorf("t4-shared ShareUnitMiB = %d, want 3840 (the agent's offer: a T4 cut in 4)", p.ShareUnitMiB)
	}
}

func TestBuild(t *testing.T) {
	mixed := func(name string, labels map[string]string, alloc map[string]string) corev1.Node {
		l := map[string]string{inventory.LabelProduct: h100, inventory.LabelMIGStrategy: "mixed"}
		for k, v := range labels {
			l[k] = v
		}
		return node(name, l, alloc)
	}
	tests := map[string]struct {
		nodes        []corev1.Node
		want         map[string]poolView
		wantWarnings []string // each warning must contain its string
	}{
		"a profile's memory label beats the catalog": {
			nodes: []corev1.Node{mixed("n0", map[string]string{"nvidia.com/mig-1g.10gb.memory": "9900"},
				map[string]string{"nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-3g.40gb": "2"})},
			want: map[string]poolView{"h100-80gb-mig-mixed": {
				Model: "H100-80GB", Mode: inventory.MIGMixed, GPUMemoryMiB: 81559,
				Profiles:     []string{"1g.10gb 9900 nvidia.com/mig-1g.10gb", "3g.40gb 40448 nvidia.com/mig-3g.40gb"},
				NodeSelector: map[string]string{inventory.LabelProduct: h100, inventory.LabelMIGStrategy: "mixed"},
				Allocatable:  map[string]int64{"nvidia.com/mig-1g.10gb": 7, "nvidia.com/mig-3g.40gb": 2}, Nodes: []string{"n0"},
			}},
		},
		"an unknown model is named from its product with the labeled memory": {
			nodes: []corev1.Node{node("rtx", map[string]string{inventory.LabelProduct: "NVIDIA-GeForce-RTX-4090", inventory.LabelMemory: "24564"},
				map[string]string{"nvidia.com/gpu": "2"})},
			want: map[string]poolView{"nvidia-geforce-rtx-4090-whole": {
				Model: "NVIDIA-GeForce-RTX-4090", Mode: inventory.Whole, Resource: "nvidia.com/gpu", GPUMemoryMiB: 24564,
				NodeSelector: map[string]string{inventory.LabelProduct: "NVIDIA-GeForce-RTX-4090"},
				Allocatable:  map[string]int64{"nvidia.com/gpu": 2}, Nodes: []string{"rtx"},
			}},
		},
		"an unknown MIG profile without a memory label is left out": {
			nodes: []corev1.Node{mixed("n0", nil, map[string]string{"nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-9g.99gb": "1"})},
			want: map[string]poolView{"h100-80gb-mig-mixed": {
				Model: "H100-80GB", Mode: inventory.MIGMixed, GPUMemoryMiB: 81559,
				Profiles:     []string{"1g.10gb 9984 nvidia.com/mig-1g.10gb"},
				NodeSelector: map[string]string{inventory.LabelProduct: h100, inventory.LabelMIGStrategy: "mixed"},
				Allocatable:  map[string]int64{"nvidia.com/mig-1g.10gb": 7, "nvidia.com/mig-9g.99gb": 1}, Nodes: []string{"n0"},
			}},
			wantWarnings: []string{"9g.99gb"},
		},
		"a GPU node with neither product nor pool label is in no pool": {
			nodes:        []corev1.Node{node("bare-gpu", nil, map[string]string{"nvidia.com/gpu": "1"})},
			want:         map[string]poolView{},
			wantWarnings: []string{"bare-gpu"},
		},
		"a node that disagrees with its pool's product or mode is left out": {
			nodes: []corev1.Node{
				mixed("a", map[string]string{inventory.LabelPool: "p"}, map[string]string{"nvidia.com/mig-1g.10gb": "7"}),
				node("b", map[string]string{inventory.LabelPool: "p", inventory.LabelProduct: "NVIDIA-A100-SXM4-80GB"}, map[string]string{"nvidia.com/gpu": "8"}),
				mixed("c", map[string]string{inventory.LabelPool: "p", inventory.LabelMIGStrategy: ""}, map[string]string{"nvidia.com/gpu": "8"}),
			},
			want: map[string]poolView{"p": {
				Model: "H100-80GB", Mode: inventory.MIGMixed, GPUMemoryMiB: 81559,
				Profiles:     []string{"1g.10gb 9984 nvidia.com/mig-1g.10gb"},
				NodeSelector: map[string]string{inventory.LabelPool: "p"},
				Allocatable:  map[string]int64{"nvidia.com/mig-1g.10gb": 7}, Nodes: []string{"a"},
			}},
			wantWarnings: []string{"node b", "node c"},
		},
		"a single-strategy node whose product names no profile is whole": {
			nodes: []corev1.Node{node("s", map[string]string{inventory.LabelProduct: "NVIDIA-A100-SXM4-40GB", inventory.LabelMIGStrategy: "single"},
				map[string]string{"nvidia.com/gpu": "8"})},
			want: map[string]poolView{"a100-40gb-whole": {
				Model: "A100-40GB", Mode: inventory.Whole, Resource: "nvidia.com/gpu", GPUMemoryMiB: 40960,
				NodeSelector: map[string]string{inventory.LabelProduct: "NVIDIA-A100-SXM4-40GB", inventory.LabelMIGStrategy: "single"},
				Allocatable:  map[string]int64{"nvidia.com/gpu": 8}, Nodes: []string{"s"},
			}},
		},
		"lifecycle and PreferNoSchedule taints are not pool taints": {
			nodes: []corev1.Node{node("w", map[string]string{inventory.LabelProduct: "NVIDIA-A100-SXM4-80GB"}, map[string]string{"nvidia.com/gpu": "8"},
				taint("node.kubernetes.io/not-ready", "", corev1.TaintEffectNoSchedule),
				taint("node.cloudprovider.kubernetes.io/uninitialized", "true", corev1.TaintEffectNoSchedule),
				taint("soft", "x", corev1.TaintEffectPreferNoSchedule),
				taint("gpu", "a100", corev1.TaintEffectNoExecute))},
			want: map[string]poolView{"a100-80gb-whole": {
				Model: "A100-80GB", Mode: inventory.Whole, Resource: "nvidia.com/gpu", GPUMemoryMiB: 81920,
				NodeSelector: map[string]string{inventory.LabelProduct: "NVIDIA-A100-SXM4-80GB"},
				Taints:       []string{"gpu=a100:NoExecute"},
				Allocatable:  map[string]int64{"nvidia.com/gpu": 8}, Nodes: []string{"w"},
			}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			inv := inventory.Build(tc.nodes, allocator.Default())
			if diff := cmp.Diff(tc.want, view(inv)); diff != "" {
				t.Errorf("pools (-want +got):\n%s", diff)
			}
			checkWarnings(t, inv.Warnings, tc.wantWarnings)
		})
	}
}

func checkWarnings(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("warnings = %q, want %d of them", got, len(want))
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("warning %d = %q, want it to name %q", i, got[i], want[i])
		}
	}
}

func TestBuildIsDeterministic(t *testing.T) {
	nodes := append(exampleNodes(t),
		node("bare-gpu", nil, map[string]string{"nvidia.com/gpu": "1"}),
		node("odd", map[string]string{inventory.LabelPool: "h100-inference", inventory.LabelProduct: "Tesla-T4"}, map[string]string{"nvidia.com/gpu": "1"}),
		node("h100-mig-2", map[string]string{inventory.LabelPool: "h100-inference", inventory.LabelProduct: h100},
			map[string]string{"nvidia.com/mig-1g.20gb": "8"}, taint("zone", "b", corev1.TaintEffectNoSchedule)),
	)
	want := inventory.Build(nodes, allocator.Default())
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20 {
		shuffled := append([]corev1.Node(nil), nodes...)
		rng.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		got := inventory.Build(shuffled, allocator.Default())
		if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(inventory.Inventory{}, inventory.Pool{}, inventory.Node{})); diff != "" {
			t.Fatalf("shuffle %d: inventory (-want +got):\n%s", i, diff)
		}
	}
}

func TestPoolFits(t *testing.T) {
	inv := inventory.Build([]corev1.Node{
		node("a", map[string]string{inventory.LabelProduct: h100}, map[string]string{"nvidia.com/mig-1g.10gb": "2"}),
		node("b", map[string]string{inventory.LabelProduct: h100}, map[string]string{"nvidia.com/mig-3g.40gb": "1"}),
	}, allocator.Default())
	p, ok := inv.Pool("h100-80gb-mig-mixed")
	if !ok {
		t.Fatalf("no pool h100-80gb-mig-mixed in %v", view(inv))
	}
	tests := map[string]struct {
		demand map[string]int64
		want   bool
	}{
		"one node has it":                       {demand: map[string]int64{"nvidia.com/mig-1g.10gb": 2}, want: true},
		"more than any node has":                {demand: map[string]int64{"nvidia.com/mig-1g.10gb": 3}},
		"two nodes could only meet it together": {demand: map[string]int64{"nvidia.com/mig-1g.10gb": 1, "nvidia.com/mig-3g.40gb": 1}},
		"a resource the pool lacks":             {demand: map[string]int64{"nvidia.com/gpu": 1}},
		"no demand":                             {demand: map[string]int64{}, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := p.Fits(tc.demand); got != tc.want {
				t.Errorf("Fits(%v) = %v, want %v", tc.demand, got, tc.want)
			}
		})
	}
}

func TestMIGResource(t *testing.T) {
	tests := map[string]struct{ profile, want string }{
		"plain":                  {profile: "1g.10gb", want: "nvidia.com/mig-1g.10gb"},
		"media extension":        {profile: "1g.10gb+me", want: "nvidia.com/mig-1g.10gb.me"},
		"resource spelling":      {profile: "1g.10gb.me", want: "nvidia.com/mig-1g.10gb.me"},
		"upper case and padding": {profile: " 3G.40GB ", want: "nvidia.com/mig-3g.40gb"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := inventory.MIGResource(tc.profile); got != tc.want {
				t.Errorf("MIGResource(%q) = %q, want %q", tc.profile, got, tc.want)
			}
		})
	}
}

func TestPoolProfileAcceptsBothSpellings(t *testing.T) {
	inv := inventory.Build([]corev1.Node{
		node("a", map[string]string{inventory.LabelProduct: h100}, map[string]string{"nvidia.com/mig-1g.10gb.me": "1"}),
	}, allocator.Default())
	p, ok := inv.Pool("h100-80gb-mig-mixed")
	if !ok {
		t.Fatalf("no pool h100-80gb-mig-mixed in %v", view(inv))
	}
	for _, name := range []string{"1g.10gb+me", "1g.10gb.me"} {
		pr, ok := p.Profile(name)
		if !ok {
			t.Errorf("Profile(%q) not found in %v", name, view(inv))
			continue
		}
		if pr.Name != "1g.10gb+me" || pr.Resource != "nvidia.com/mig-1g.10gb.me" || pr.MemoryMiB != 9984 {
			t.Errorf("Profile(%q) = %s %s %d MiB, want 1g.10gb+me nvidia.com/mig-1g.10gb.me 9984 MiB", name, pr.Name, pr.Resource, pr.MemoryMiB)
		}
	}
	if _, ok := p.Profile("1g.10gb"); ok {
		t.Errorf("Profile(1g.10gb) found on a pool that serves only 1g.10gb+me")
	}
}

func BenchmarkBuild1000Nodes(b *testing.B) {
	templates := []func(i int) corev1.Node{
		func(i int) corev1.Node {
			return node(fmt.Sprintf("h100-%d", i), map[string]string{inventory.LabelPool: "h100-inference", inventory.LabelProduct: h100},
				map[string]string{"nvidia.com/mig-1g.10gb": "28", "nvidia.com/mig-3g.40gb": "4"}, taint("dedicated", "inference", corev1.TaintEffectNoSchedule))
		},
		func(i int) corev1.Node {
			return node(fmt.Sprintf("h200-%d", i), map[string]string{inventory.LabelProduct: "NVIDIA-H200", inventory.LabelMIGStrategy: "mixed"},
				map[string]string{"nvidia.com/mig-1g.18gb": "28", "nvidia.com/mig-7g.141gb": "1"})
		},
		func(i int) corev1.Node {
			return node(fmt.Sprintf("a100s-%d", i), map[string]string{inventory.LabelProduct: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"}, map[string]string{"nvidia.com/gpu": "56"})
		},
		func(i int) corev1.Node {
			return node(fmt.Sprintf("t4-%d", i), map[string]string{inventory.LabelProduct: "Tesla-T4"}, map[string]string{"gpuadmit.io/gpu-mem": "60"})
		},
		func(i int) corev1.Node {
			return node(fmt.Sprintf("a100w-%d", i), map[string]string{inventory.LabelProduct: "NVIDIA-A100-SXM4-80GB"}, map[string]string{"nvidia.com/gpu": "8"})
		},
	}
	nodes := make([]corev1.Node, 1000)
	for i := range nodes {
		nodes[i] = templates[i%len(templates)](i)
	}
	cat := allocator.Default()
	if n := len(inventory.Build(nodes, cat).Pools); n != len(templates) {
		b.Fatalf("built %d pools, want %d", n, len(templates))
	}
	for b.Loop() {
		inventory.Build(nodes, cat)
	}
}

// TestAgentReadingsWin: the agent's NVML reading beats GFD's label, which
// beats the catalog.
func TestAgentReadingsWin(t *testing.T) {
	n := corev1.Node{}
	n.Name = "h100"
	n.Labels = map[string]string{inventory.LabelProduct: "NVIDIA-H100-80GB-HBM3", inventory.LabelMemory: "81000", "nvidia.com/mig-1g.10gb.memory": "9900"}
	n.Annotations = map[string]string{inventory.AnnotationGPUs: `[{"model":"H100-80GB","memoryMiB":81559,"migMode":"Enabled","healthy":true,
		"profiles":[{"name":"1g.10gb","id":19,"computeSlices":1,"memorySlices":1,"memoryMiB":9984,"sms":16,"maxInstances":7,"placements":[{"start":0,"size":1}]}]}]`}
	n.Status.Allocatable = corev1.ResourceList{"nvidia.com/mig-1g.10gb": resource.MustParse("7")}
	p := inventory.Build([]corev1.Node{n}, nil).Pools[0]
	pr, _ := p.Profile("1g.10gb")
	if p.GPUMemoryMiB != 81559 || pr.MemoryMiB != 9984 || pr.SMs != 16 {
		t.Errorf("GPU %d MiB, 1g.10gb %d MiB %d SMs; want the agent's 81559, 9984, 16", p.GPUMemoryMiB, pr.MemoryMiB, pr.SMs)
	}
	n.Annotations[inventory.AnnotationGPUs] = "not json"
	p = inventory.Build([]corev1.Node{n}, nil).Pools[0]
	if pr, _ := p.Profile("1g.10gb"); p.GPUMemoryMiB != 81000 || pr.MemoryMiB != 9900 {
		t.Errorf("with a malformed annotation: GPU %d MiB, 1g.10gb %d MiB; want GFD's 81000 and 9900", p.GPUMemoryMiB, pr.MemoryMiB)
	}
}
