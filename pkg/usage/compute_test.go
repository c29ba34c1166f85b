package usage_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
	"github.com/gpuadmit/gpuadmit/pkg/usage"
)

const (
	t4MiB = 15360 // a Tesla T4 as the catalog has it
	pool  = "t4-whole"
)

// t4Node is a node of GPU Feature Discovery labels and allocatable resources
// with gpus T4s, cpu CPUs and 64 GiB of memory.
func t4Node(name string, gpus int64, cpu string) corev1.Node {
	mib := resource.NewQuantity(gpus*t4MiB, resource.DecimalSI)
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			inventory.LabelProduct: "Tesla-T4", inventory.LabelCount: resource.NewQuantity(gpus, resource.DecimalSI).String(),
		}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			inventory.ResourceGPU:                              *resource.NewQuantity(gpus, resource.DecimalSI),
			inventory.ResourceMemoryMiB:                        *mib,
			corev1.ResourceName(inventory.ModelResource("T4")): *mib,
			corev1.ResourceCPU:                                 resource.MustParse(cpu),
			corev1.ResourceMemory:                              resource.MustParse("64Gi"),
		}},
	}
}

// pod is a gpuadmit pod in namespace ns asking mib of GPU memory (the
// accounting resource), gpus whole GPUs when gpus > 0, and cpu; bound to
// node, or pending on pool when node is "".
func pod(ns, name, node string, mib, gpus int64, cpu string) *corev1.Pod {
	req := corev1.ResourceList{
		inventory.ResourceMemoryMiB: *resource.NewQuantity(mib, resource.DecimalSI),
		corev1.ResourceCPU:          resource.MustParse(cpu),
	}
	c := corev1.Container{Name: "main", Resources: corev1.ResourceRequirements{Requests: req}}
	if gpus > 0 {
		req[inventory.ResourceGPU] = *resource.NewQuantity(gpus, resource.DecimalSI)
	} else {
		c.Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}} // a DRA share
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{
			record.AnnotationDecision: "main: share; pool " + pool + "; revision r1",
		}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{c}},
	}
}

// t4s are two T4s of n1 known one by one, holding held MiB each.
func t4s(held ...int64) map[string][]usage.GPU {
	var out []usage.GPU
	for i, h := range held {
		out = append(out, usage.GPU{UUID: "GPU-" + string(rune('a'+i)), CapacityMiB: t4MiB, AllocatedMiB: h})
	}
	return map[string][]usage.GPU{"n1": out}
}

func TestStranded(t *testing.T) {
	nodes := []corev1.Node{t4Node("n1", 2, "32")}
	ninePlusNine := []*corev1.Pod{pod("a", "p1", "n1", 9216, 0, "1"), pod("a", "p2", "n1", 9216, 0, "1")}
	tenGiB := pod("b", "wait", "", 10240, 0, "1")
	tests := map[string]struct {
		nodes []corev1.Node
		pods  []*corev1.Pod
		gpus  map[string][]usage.GPU
		sizes []usage.Size
		want  int64
	}{
		// 6+6 GiB free across two GPUs, 10 GiB asked.
		"6+6 GiB free on two GPUs, 10 GiB pending: all 12 GiB stranded": {
			pods: append(ninePlusNine, tenGiB), gpus: t4s(9216, 9216), want: 12288,
		},
		"a typical 4 GiB request can use both 6 GiB holes": {
			pods: append(ninePlusNine, tenGiB), gpus: t4s(9216, 9216),
			sizes: []usage.Size{{GPUMemoryMiB: 4096, GPUs: 1}}, want: 0,
		},
		"10 GiB fits the GPU with 15 GiB free, not the one with 6": {
			pods: []*corev1.Pod{pod("a", "p1", "n1", 9216, 0, "1"), tenGiB}, gpus: t4s(9216, 0), want: 6144,
		},
		// Nothing fits where nothing is asked: policy data should list typical sizes.
		"nothing pending and no typical size: every free MiB is stranded": {
			pods: ninePlusNine, gpus: t4s(9216, 9216), want: 12288,
		},
		"an empty GPU is stranded when the node's CPU is gone": {
			nodes: []corev1.Node{t4Node("n1", 2, "4")},
			pods:  []*corev1.Pod{pod("a", "p1", "n1", 9216, 0, "4"), tenGiB}, gpus: t4s(9216, 0), want: t4MiB + 6144,
		},
		"whole GPUs from resources: 2 free GPUs, 4 asked": {
			nodes: []corev1.Node{t4Node("n1", 8, "32")},
			pods:  []*corev1.Pod{pod("a", "p1", "n1", 6*t4MiB, 6, "1"), pod("b", "wait", "", 4*t4MiB, 4, "1")},
			want:  2 * t4MiB,
		},
		"whole GPUs from resources: a typical one-GPU request uses them": {
			nodes: []corev1.Node{t4Node("n1", 8, "32")},
			pods:  []*corev1.Pod{pod("a", "p1", "n1", 6*t4MiB, 6, "1"), pod("b", "wait", "", 4*t4MiB, 4, "1")},
			sizes: []usage.Size{{GPUMemoryMiB: t4MiB, GPUs: 1}},
			want:  0,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if tt.nodes == nil {
				tt.nodes = nodes
			}
			r := usage.Compute(usage.Input{
				Inventory: inventory.Build(tt.nodes, allocator.Default()), Nodes: tt.nodes, Pods: tt.pods,
				GPUs: tt.gpus, Config: usage.Config{Sizes: tt.sizes},
			})
			got := poolOf(t, r, pool)
			if got.StrandedMiB != tt.want {
				t.Errorf("stranded = %d MiB, want %d (free %d)", got.StrandedMiB, tt.want, got.FreeMiB)
			}
		})
	}
}

func poolOf(t *testing.T, r usage.Report, name string) usage.Pool {
	t.Helper()
	for _, p := range r.Pools {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no pool %s in %+v", name, r.Pools)
	return usage.Pool{}
}

// Six plus six in full: every figure of the pool, and the GPUs.
func TestComputeSixPlusSix(t *testing.T) {
	nodes := []corev1.Node{t4Node("n1", 2, "32")}
	pods := []*corev1.Pod{pod("a", "p1", "n1", 9216, 0, "1"), pod("a", "p2", "n1", 9216, 0, "1"),
		pod("b", "w1", "", 10240, 0, "1"), pod("b", "w2", "", 10240, 0, "1")}
	pods[3].Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available: 1 cannot allocate all claims, 2 node(s) didn't match Pod's node affinity/selector."}}
	r := usage.Compute(usage.Input{Inventory: inventory.Build(nodes, allocator.Default()), Nodes: nodes, Pods: pods, GPUs: t4s(9216, 9216)})
	want := usage.Pool{
		Name: pool, Model: "T4", Mode: inventory.Whole, GPUs: 2, GPUMemoryMiB: t4MiB,
		CapacityMiB: 2 * t4MiB, FreeMiB: 12288, StrandedMiB: 12288,
		// Both pod kinds (9 GiB bound, 10 GiB pending; half each) find no
		// GPU with room, so each 6 GiB hole is a fragment of both.
		FragmentationMiB: 12288,
		Allocated:        map[usage.Holder]int64{{Namespace: "a", Form: usage.FormShare}: 18432},
		Pending: map[usage.Waiter]usage.Waiting{
			{Namespace: "b", Reason: usage.ReasonNotTried}: {Pods: 1, MiB: 10240},
			{Namespace: "b", Reason: usage.ReasonGPU}:      {Pods: 1, MiB: 10240},
		},
	}
	if diff := cmp.Diff(want, poolOf(t, r, pool)); diff != "" {
		t.Errorf("pool (-want +got):\n%s", diff)
	}
	wantGPUs := []usage.GPUAllocation{
		{GPU: usage.GPU{UUID: "GPU-a", CapacityMiB: t4MiB, AllocatedMiB: 9216}, Node: "n1", Pool: pool, Model: "T4"},
		{GPU: usage.GPU{UUID: "GPU-b", CapacityMiB: t4MiB, AllocatedMiB: 9216}, Node: "n1", Pool: pool, Model: "T4"},
	}
	if diff := cmp.Diff(wantGPUs, r.GPUs); diff != "" {
		t.Errorf("GPUs (-want +got):\n%s", diff)
	}
}

// A GPU's MIG devices are one series under its UUID; a device without a UUID none.
func TestGPUsSumDevicesUnderTheirGPU(t *testing.T) {
	nodes := []corev1.Node{t4Node("n1", 2, "32")}
	gpus := map[string][]usage.GPU{"n1": {
		{UUID: "GPU-c", CapacityMiB: 9984, AllocatedMiB: 9984}, {UUID: "GPU-c", CapacityMiB: 9984}, {CapacityMiB: 9984, AllocatedMiB: 1},
	}}
	r := usage.Compute(usage.Input{Inventory: inventory.Build(nodes, allocator.Default()), Nodes: nodes, GPUs: gpus})
	want := []usage.GPUAllocation{{GPU: usage.GPU{UUID: "GPU-c", CapacityMiB: 19968, AllocatedMiB: 9984}, Node: "n1", Pool: pool, Model: "T4"}}
	if diff := cmp.Diff(want, r.GPUs); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// On a node known GPU by GPU, free memory is what the claims leave, even
// where no pod of gpuadmit's accounts for a claim (a claim made by hand).
func TestFreeFollowsTheClaims(t *testing.T) {
	nodes := []corev1.Node{t4Node("n1", 2, "32")}
	r := usage.Compute(usage.Input{Inventory: inventory.Build(nodes, allocator.Default()), Nodes: nodes, GPUs: t4s(9216, 0)})
	if got := poolOf(t, r, pool).FreeMiB; got != 6144+t4MiB {
		t.Errorf("free = %d MiB, want %d", got, 6144+t4MiB)
	}
}

// Fragmentation weighs the workload's kinds; stranded needs only one demand
// to fit. With 6 GiB free on one GPU and 15 GiB on the other, and pods of
// 9, 10 and 4 GiB (a third each), the 6 GiB hole is a fragment of the two
// larger kinds only: 2/3 × 6144 = 4096 MiB of fragmentation, while the 4
// GiB pod can use it, so nothing is stranded.
func TestFragmentationWeighsKinds(t *testing.T) {
	nodes := []corev1.Node{t4Node("n1", 2, "32")}
	pods := []*corev1.Pod{pod("a", "p1", "n1", 9216, 0, "1"), pod("b", "w10", "", 10240, 0, "1"), pod("b", "w4", "", 4096, 0, "1")}
	r := usage.Compute(usage.Input{Inventory: inventory.Build(nodes, allocator.Default()), Nodes: nodes, Pods: pods, GPUs: t4s(9216, 0)})
	got := poolOf(t, r, pool)
	if got.FragmentationMiB != 4096 || got.StrandedMiB != 0 {
		t.Errorf("fragmentation %v MiB, stranded %d MiB; want 4096 and 0", got.FragmentationMiB, got.StrandedMiB)
	}
}

// A node that says nothing of its CPU and memory limits no demand by them.
func TestUnknownCPUAndMemoryLimitNothing(t *testing.T) {
	n := t4Node("n1", 2, "32")
	delete(n.Status.Allocatable, corev1.ResourceCPU)
	delete(n.Status.Allocatable, corev1.ResourceMemory)
	nodes := []corev1.Node{n}
	pods := []*corev1.Pod{pod("b", "w10", "", 10240, 0, "4")}
	r := usage.Compute(usage.Input{Inventory: inventory.Build(nodes, allocator.Default()), Nodes: nodes, Pods: pods, GPUs: t4s(9216, 0)})
	if got := poolOf(t, r, pool).StrandedMiB; got != 6144 {
		t.Errorf("stranded = %d MiB, want 6144: the 10 GiB pod fits the empty GPU", got)
	}
}

// A pod that is not gpuadmit's holds no GPU but takes its node's CPU: with
// it counted (Input.Others), the 10 GiB pod no longer fits the empty GPU
// and both holes are stranded; without it (the leader's view), only the
// 6 GiB hole is.
func TestOthersTakeCPUAndMemory(t *testing.T) {
	nodes := []corev1.Node{t4Node("n1", 2, "8")}
	pods := []*corev1.Pod{pod("a", "p1", "n1", 9216, 0, "1"), pod("b", "w10", "", 10240, 0, "4")}
	web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "nginx"},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}}}}
	done := web.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	elsewhere := web.DeepCopy()
	elsewhere.Spec.NodeName = "cpu-node"
	tests := map[string]struct {
		others []*corev1.Pod
		want   int64
	}{
		"the leader's view: no other pods":           {want: 6144},
		"4 CPUs of 8 held by another pod":            {others: []*corev1.Pod{web}, want: 6144 + t4MiB},
		"a finished pod holds nothing":               {others: []*corev1.Pod{done}, want: 6144},
		"a pod on a node of no pool changes nothing": {others: []*corev1.Pod{elsewhere}, want: 6144},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			r := usage.Compute(usage.Input{Inventory: inventory.Build(nodes, allocator.Default()), Nodes: nodes, Pods: pods,
				Others: tt.others, GPUs: t4s(9216, 0)})
			got := poolOf(t, r, pool)
			if got.StrandedMiB != tt.want {
				t.Errorf("stranded = %d MiB, want %d", got.StrandedMiB, tt.want)
			}
			if want := map[usage.Holder]int64{{Namespace: "a", Form: usage.FormShare}: 9216}; !cmp.Equal(want, got.Allocated) {
				t.Errorf("allocated %v, want only gpuadmit's pod's %v", got.Allocated, want)
			}
		})
	}
}

// A pod that asks two whole GPUs through one claim (as the replay
// benchmark's pods, or a claim written by hand) is a demand of two GPUs of
// half its memory each, not of one device of all of it: the two free T4s
// are usable by it, so nothing is stranded; and the kind it adds to the
// fragmentation workload fits the node's two free GPUs.
func TestClaimOfTwoGPUsIsTwoDevices(t *testing.T) {
	nodes := []corev1.Node{t4Node("n1", 2, "32")}
	wait := pod("b", "wait", "", 2*t4MiB, 0, "1")
	wait.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("two")}}
	in := usage.Input{Inventory: inventory.Build(nodes, allocator.Default()), Nodes: nodes, Pods: []*corev1.Pod{wait},
		GPUs: t4s(0, 0), ClaimDevices: map[string]int64{"b/two": 2}}
	if got := poolOf(t, usage.Compute(in), pool).StrandedMiB; got != 0 {
		t.Errorf("stranded = %d MiB, want 0: the pod fits the two free GPUs", got)
	}
	// The same pod bound to two GPUs of a node of four: its kind, the
	// pool's workload, fits the two free GPUs, so no memory is a fragment
	// (as one device of 30 GiB it would fit nowhere: all 30 GiB would be).
	bound := pod("b", "bound", "n1", 2*t4MiB, 0, "1")
	bound.Spec.ResourceClaims = wait.Spec.ResourceClaims
	in.Nodes = []corev1.Node{t4Node("n1", 4, "32")}
	in.Inventory = inventory.Build(in.Nodes, allocator.Default())
	in.Pods, in.GPUs = []*corev1.Pod{bound}, t4s(t4MiB, t4MiB, 0, 0)
	if got := poolOf(t, usage.Compute(in), pool).FragmentationMiB; got != 0 {
		t.Errorf("fragmentation = %v MiB, want 0", got)
	}
}
