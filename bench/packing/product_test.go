package packing

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// productNodes are one node of each of three trace models: T4 (2 GPUs,
// the least memory), V100M32 and G2 (8 GPUs each).
func productNodes() []Node {
	return []Node{
		{Name: "t4", MilliCPU: 32000, MemoryMiB: 131072, GPUs: 2, Model: "T4"},
		{Name: "v100", MilliCPU: 96000, MemoryMiB: 393216, GPUs: 8, Model: "V100M32"},
		{Name: "g2", MilliCPU: 96000, MemoryMiB: 393216, GPUs: 8, Model: "G2"},
	}
}

// TestProductAlternativesAreTheDefaultPolicies: the alternatives come
// from the embedded default policies through the webhook's mutator: shares
// before whole GPUs, least GPU memory first (T4, V100M32, G2), models whose
// nodes are too small for the request left out, and a pod whose gpu_spec
// names one model gets that model only.
func TestProductAlternativesAreTheDefaultPolicies(t *testing.T) {
	d, err := NewProductDeriver(context.Background(), productNodes())
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		pod  Pod
		want []Alt
	}{
		"a share that runs anywhere: shares, then whole GPUs, least memory first": {
			pod: Pod{GPUs: 1, GPUMilli: 460},
			want: []Alt{{"T4", 460, 1}, {"V100M32", 460, 1}, {"G2", 460, 1},
				{"T4", 1000, 1}, {"V100M32", 1000, 1}, {"G2", 1000, 1}},
		},
		"four GPUs: not on T4, whose node has two": {
			pod:  Pod{GPUs: 4, GPUMilli: 1000},
			want: []Alt{{"V100M32", 1000, 4}, {"G2", 1000, 4}},
		},
		"gpu_spec of two models, in the policy's order, not the spec's": {
			pod:  Pod{GPUs: 1, GPUMilli: 500, Spec: "G2|T4"},
			want: []Alt{{"T4", 500, 1}, {"G2", 500, 1}, {"T4", 1000, 1}, {"G2", 1000, 1}},
		},
		"gpu_spec of one model: that model only": {
			pod:  Pod{GPUs: 1, GPUMilli: 500, Spec: "G2"},
			want: []Alt{{"G2", 500, 1}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := d.Alternatives(context.Background(), tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestProductRefusesAWorkloadTheWebhookDenies: a pod whose gpu_spec names
// no model of the cluster is denied by the webhook, and the policy says so
// instead of simulating a pod the product would never admit.
func TestProductRefusesAWorkloadTheWebhookDenies(t *testing.T) {
	_, err := NewPolicy("product", []Pod{{Name: "x", GPUs: 1, GPUMilli: 500, Spec: "A10"}}, productNodes())
	if err == nil || !strings.Contains(err.Error(), "is denied") {
		t.Fatalf("err = %v, want the webhook's denial", err)
	}
}

// TestProductKeepsOneModelPodsAndFollowsThePolicysOrder: two nodes whose
// placement costs are equal, G2 first in the tie order. gpuadmit, free to
// choose the model, takes the tie's first node, G2; the product's path
// takes T4, the default policies' first alternative (altStep). A pod whose
// gpu_spec names G2 goes to G2 only: the T4 node, which it would fit, is
// never chosen, and once G2 is full it fits nowhere.
func TestProductKeepsOneModelPodsAndFollowsThePolicysOrder(t *testing.T) {
	nodes := []Node{
		{Name: "g2", MilliCPU: 32000, MemoryMiB: 131072, GPUs: 2, Model: "G2"},
		{Name: "t4", MilliCPU: 32000, MemoryMiB: 131072, GPUs: 2, Model: "T4"},
	}
	anyModel := Pod{Name: "any", MilliCPU: 4000, MemoryMiB: 8192, GPUs: 1, GPUMilli: 1000}
	onG2 := anyModel
	onG2.Name, onG2.Spec = "on-g2", "G2"
	// No kind of the workload is pinned, so no model is priced
	// (allocator.Scarcity): the pod pinned to G2 is decided as it comes.
	workload := []Pod{anyModel}
	place := func(name string, c *Cluster, p Pod) *NodeState {
		t.Helper()
		pol, err := NewPolicy(name, workload, nodes)
		if err != nil {
			t.Fatal(err)
		}
		q, ok := p, true
		if a, is := pol.(Admitter); is {
			q, ok = a.Admit(c, p)
		}
		if !ok {
			t.Fatalf("%s: pod %s not admitted", name, p.Name)
		}
		r := rand.New(rand.NewPCG(1, 2))
		n := choose(c, q, pol, r)
		if n != nil {
			n.Assign(q, pol.GPUs(n, q, r))
		}
		return n
	}
	nameOf := func(n *NodeState) string {
		if n == nil {
			return "none"
		}
		return n.Name
	}
	got := map[string]string{
		"gpuadmit, any model": nameOf(place("gpuadmit", NewCluster(nodes), anyModel)),
		"product, any model":  nameOf(place("product", NewCluster(nodes), anyModel)),
	}
	c := NewCluster(nodes)
	got["product, G2 only"] = nameOf(place("product", c, onG2))
	got["product, G2 only, again"] = nameOf(place("product", c, onG2))
	got["product, G2 only, G2 full"] = nameOf(place("product", c, onG2))
	want := map[string]string{
		"gpuadmit, any model":       "g2",
		"product, any model":        "t4",
		"product, G2 only":          "g2",
		"product, G2 only, again":   "g2",
		"product, G2 only, G2 full": "none",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("node chosen (-want +got)\n%s", diff)
	}
}

// TestPinnedPicksTheModelByOrder: a share that runs anywhere, on a T4 node
// (the policy's first, 2 GPUs) and a G2 node (8 GPUs), pinned to one model
// by each way of picking the pool.
func TestPinnedPicksTheModelByOrder(t *testing.T) {
	nodes := []Node{
		{Name: "t4", MilliCPU: 32000, MemoryMiB: 131072, GPUs: 2, Model: "T4"},
		{Name: "g2", MilliCPU: 96000, MemoryMiB: 393216, GPUs: 8, Model: "G2"},
	}
	share := Pod{Name: "share", MilliCPU: 4000, MemoryMiB: 8192, GPUs: 1, GPUMilli: 500}
	onT4 := Pod{Name: "on-t4", MilliCPU: 4000, MemoryMiB: 8192, GPUs: 2, GPUMilli: 1000, Spec: "T4"}
	unpinned := []Pod{share}
	withT4Pods := []Pod{share, onT4, onT4, onT4}
	cpuBound := Pod{Name: "cpu", MilliCPU: 30000, MemoryMiB: 1024}
	tests := map[string]struct {
		order    PinOrder
		workload []Pod
		// before runs on the cluster first: pods placed (on their only
		// model), or, waiting, told to the policy as fitting nowhere.
		placed, waiting []Pod
		want            string
	}{
		"policy order: the least memory first": {order: PinPolicyOrder, workload: unpinned, want: "T4"},
		"policy order: a model whose nodes lack CPU has no room": {
			order: PinPolicyOrder, workload: unpinned, placed: []Pod{cpuBound}, want: "G2"},
		"most free: G2's 8 GPUs": {order: PinMostFree, workload: unpinned, want: "G2"},
		"scarcity, nothing waits: equal prices keep the policy's order": {
			order: PinScarcity, workload: withT4Pods, want: "T4"},
		"scarcity: a T4-only pod waits": {
			order: PinScarcity, workload: withT4Pods, waiting: []Pod{onT4}, want: "G2"},
		"expected: T4-only kinds in the workload":      {order: PinExpected, workload: withT4Pods, want: "G2"},
		"expected: no pinned kind, the policy's order": {order: PinExpected, workload: unpinned, want: "T4"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pol, err := NewPinned(tc.workload, nodes, tc.order)
			if err != nil {
				t.Fatal(err)
			}
			c := NewCluster(nodes)
			for _, p := range tc.placed {
				c.Nodes[0].Assign(p, nil)
			}
			for _, p := range tc.waiting {
				q, ok := pol.Admit(c, p)
				if !ok {
					t.Fatalf("pod %s not admitted", p.Name)
				}
				pol.Placed(q, nil)
			}
			q, ok := pol.Admit(c, share)
			if !ok {
				t.Fatal("share not admitted")
			}
			if q.Spec != tc.want {
				t.Errorf("pinned to %q, want %q", q.Spec, tc.want)
			}
		})
	}
}

// TestPinnedByNameOrdersPoolsByName: "+names" gives every model's GPU the
// same memory, so the policy's order is the pools' names (G2 before T4),
// where by memory T4 comes first.
func TestPinnedByNameOrdersPoolsByName(t *testing.T) {
	nodes := []Node{
		{Name: "t4", MilliCPU: 32000, MemoryMiB: 131072, GPUs: 2, Model: "T4"},
		{Name: "g2", MilliCPU: 96000, MemoryMiB: 393216, GPUs: 8, Model: "G2"},
	}
	share := Pod{Name: "share", MilliCPU: 4000, MemoryMiB: 8192, GPUs: 1, GPUMilli: 500}
	for name, want := range map[string]string{"pinned": "T4", "pinned+names": "G2", "Pinned-Expected+names": "G2"} {
		pol, err := NewPolicy(name, []Pod{share}, nodes)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		q, ok := pol.(*Pinned).Admit(NewCluster(nodes), share)
		if !ok || q.Spec != want {
			t.Errorf("%s: pinned to %q (admitted %v), want %q", name, q.Spec, ok, want)
		}
	}
	if _, err := NewPolicy("pinned-nowhere+names", nil, nodes); err == nil {
		t.Error("pinned-nowhere+names: no error")
	}
}

// deniesAll is an Admitter that admits nothing.
type deniesAll struct{ BestFit }

func (deniesAll) Admit(_ *Cluster, p Pod) (Pod, bool) { return p, false }
func (deniesAll) Placed(Pod, *NodeState)              {}

// TestSimulateCountsDeniedPodsAsFailed: a pod the admission step denies is
// never placed, though it fits.
func TestSimulateCountsDeniedPodsAsFailed(t *testing.T) {
	c := NewCluster(productNodes())
	pods := []Pod{{Name: "a", MilliCPU: 1000, MemoryMiB: 1024, GPUs: 1, GPUMilli: 500}, {Name: "b", MilliCPU: 1000, MemoryMiB: 1024}}
	run := Simulate(c, pods, deniesAll{}, Options{Arrived: []float64{0.01}})
	if run.Failed != len(pods) {
		t.Errorf("failed = %d, want %d", run.Failed, len(pods))
	}
	for _, n := range c.Nodes {
		if n.Version != 0 {
			t.Errorf("node %s took a pod", n.Name)
		}
	}
}
