package packing

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

func TestParseProductVariant(t *testing.T) {
	tests := map[string]struct {
		name    string
		want    ProductVariant
		ok      bool
		wantErr string
	}{
		"not a variant":  {name: "product"},
		"one modifier":   {name: "product+online", want: ProductVariant{Online: true}, ok: true},
		"several":        {name: "Product+blind+step0", want: ProductVariant{ModelBlind: true, AltStep: step(0)}, ok: true},
		"a step":         {name: "product+step2.5", want: ProductVariant{AltStep: step(2.5)}, ok: true},
		"a bad step":     {name: "product+step-1", ok: true, wantErr: "step wants a cost of 0 or more"},
		"a step of NaN":  {name: "product+stepNaN", ok: true, wantErr: "step wants a cost of 0 or more"},
		"the plugin":     {name: "product+plugin", want: ProductVariant{Online: true, PluginKinds: true, ModelBlind: true, ByName: true, Spaced: true}, ok: true},
		"the old rule":   {name: "product+online+refresh1", want: ProductVariant{Online: true, Refresh: 0.01}, ok: true},
		"spaced":         {name: "product+plugin+spaced", want: ProductVariant{Online: true, PluginKinds: true, ModelBlind: true, ByName: true, Spaced: true}, ok: true},
		"spaced alone":   {name: "product+spaced", ok: true, wantErr: "name online"},
		"an unknown one": {name: "product+fast", ok: true, wantErr: `unknown modifier "fast"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok, err := ParseProductVariant(tc.name)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || ok != tc.ok || !cmp.Equal(got, tc.want) {
				t.Errorf("= %+v, %v, %v; want %+v, %v", got, ok, err, tc.want, tc.ok)
			}
		})
	}
}

func step(f float64) *float64 { return &f }

// TestOnlineWorkloadRevisesByThePluginsRule: the first pod makes a
// revision; pods that keep the mix do not; a new kind revises once the
// mix has moved by 5% (total variation distance) and 5% of the pods
// counted have come since the last revision.
func TestOnlineWorkloadRevisesByThePluginsRule(t *testing.T) {
	small := allocator.FragTask{GPUs: 1, GPUMilli: 500}
	large := allocator.FragTask{GPUs: 1, GPUMilli: 1000}
	w := newOnlineWorkload()
	revised := func(t allocator.FragTask) bool {
		w.add(t)
		_, ok := w.revise()
		return ok
	}
	var got []bool
	got = append(got, revised(small)) // the first pod
	for range 198 {
		if revised(small) { // the mix holds: never
			got = append(got, true)
		}
	}
	// k large pods move the mix by k/(199+k): under onlineRefresh (5%)
	// until the 11th
	for range 10 {
		got = append(got, revised(large))
	}
	got = append(got, revised(large))
	want := append(append([]bool{true}, make([]bool, 10)...), true)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("revisions (-want +got)\n%s", diff)
	}
	kinds, _ := w.revise()
	if kinds != nil {
		t.Errorf("a revision with nothing new: %v", kinds)
	}
}

// Spaced, a revision due waits until spacing pods were counted since the
// last one.
func TestOnlineWorkloadSpacesItsRevisions(t *testing.T) {
	small := allocator.FragTask{GPUs: 1, GPUMilli: 500}
	large := allocator.FragTask{GPUs: 1, GPUMilli: 1000}
	w := newOnlineWorkload()
	w.spacing = 3
	var got []bool
	for _, k := range []allocator.FragTask{small, large, large, large, small, large} {
		w.add(k)
		_, ok := w.revise()
		got = append(got, ok)
	}
	// the first pod revises; each later one moves the mix by more than 5%,
	// but only every third count may revise
	if diff := cmp.Diff([]bool{true, false, false, true, false, false}, got); diff != "" {
		t.Errorf("revisions (-want +got)\n%s", diff)
	}
	if onlineSpacing(1213) != 10 || onlineSpacing(400) != 4 {
		t.Errorf("spacing at 1,213 and 400 nodes: %d, %d; want 10, 4", onlineSpacing(1213), onlineSpacing(400))
	}
}

// TestOnlineProductPricesOnlyThePodsSeen: a T4 node and a G2 node of equal
// size; the pod list is a share that runs anywhere and three pods pinned
// to T4. Learning the whole list first, the product prices T4 and sends
// the share that comes first to G2; learning online, it has seen only that
// share, prices nothing, and puts it on T4 (its first alternative), with
// the plugin's kinds and model-blind fragmentation too.
func TestOnlineProductPricesOnlyThePodsSeen(t *testing.T) {
	nodes := []Node{
		{Name: "g2", MilliCPU: 32000, MemoryMiB: 131072, GPUs: 2, Model: "G2"},
		{Name: "t4", MilliCPU: 32000, MemoryMiB: 131072, GPUs: 2, Model: "T4"},
	}
	share := Pod{Name: "share", MilliCPU: 4000, MemoryMiB: 8192, GPUs: 1, GPUMilli: 500}
	onT4 := Pod{Name: "on-t4", MilliCPU: 4000, MemoryMiB: 8192, GPUs: 1, GPUMilli: 1000, Spec: "T4"}
	list := []Pod{share, onT4, onT4, onT4}
	got := map[string]string{}
	for _, name := range []string{"product", "product+online", "product+online+kinds+blind"} {
		pol, err := NewPolicy(name, list, nodes)
		if err != nil {
			t.Fatal(err)
		}
		c := NewCluster(nodes)
		q, ok := pol.(Admitter).Admit(c, share)
		if !ok {
			t.Fatalf("%s: share not admitted", name)
		}
		n := choose(c, q, pol, rand.New(rand.NewPCG(1, 2)))
		if n == nil {
			t.Fatalf("%s: share placed nowhere", name)
		}
		got[name] = n.Name
	}
	want := map[string]string{"product": "g2", "product+online": "t4", "product+online+kinds+blind": "t4"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("node chosen (-want +got)\n%s", diff)
	}
}

// TestByNameOrdersTheAlternativesByPoolName: with every model's memory
// equal, as the replay represents the trace, the default policies' order
// falls back to the pools' names: G2 before T4 before V100M32.
func TestByNameOrdersTheAlternativesByPoolName(t *testing.T) {
	pol, err := NewPolicy("product+names", nil, productNodes())
	if err != nil {
		t.Fatal(err)
	}
	got, err := pol.(*Product).deriver.Alternatives(t.Context(), Pod{GPUs: 1, GPUMilli: 460})
	if err != nil {
		t.Fatal(err)
	}
	want := []Alt{{"G2", 460, 1}, {"T4", 460, 1}, {"V100M32", 460, 1}, {"G2", 1000, 1}, {"T4", 1000, 1}, {"V100M32", 1000, 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}
