package placement

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// TestPricesAreTheSimulatorsScarcity: the price per model is what
// allocator.Scarcity (the simulator's gpuadmit policy's price) gives for
// the same kinds and supply, each kind accepting the models its pin
// allows; with no kind pinned to some models only, nothing is priced, so
// every score is what it was without a price.
func TestPricesAreTheSimulatorsScarcity(t *testing.T) {
	gib := int64(1) << 30
	dra := shape{dra: true, capacity: 16 * gib, min: gib, step: gib, def: 16 * gib}
	nodeOf := func(name, model string) nodeModel {
		return nodeModel{node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"product": model}}}, model: model}
	}
	pl := &Plugin{}
	pl.supply.gpus = map[string]int{"T4": 8, "V100": 8, "A100": 16}
	pl.supply.shapes = map[string]modelInfo{"T4": {dra: dra, hasDRA: true}, "V100": {dra: dra, hasDRA: true}, "A100": {dra: dra, hasDRA: true}}
	pl.supply.of = []nodeModel{nodeOf("t", "T4"), nodeOf("v", "V100"), nodeOf("a", "A100")}
	pl.supply.accepted = map[string]map[string]bool{}
	on := func(models ...string) (string, *nodeaffinity.RequiredNodeAffinity) {
		p := &corev1.Pod{Spec: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "product", Operator: corev1.NodeSelectorOpIn, Values: models}}}}}}}}}
		m := nodeaffinity.GetRequiredNodeAffinity(p)
		return nodeConstraints(p), &m
	}
	half := kind{dra: true, item: item{memory: 8 * gib}, gpus: 1}
	whole2 := kind{dra: true, item: item{whole: true}, gpus: 2}
	t4Key, t4Match := on("T4")
	anyKey, anyMatch := on("T4", "V100", "A100")
	tests := map[string]struct {
		pinned []pinnedKind
		tasks  []allocator.FragTask // the simulator's kinds for the same pods
	}{
		"no pins": {
			pinned: []pinnedKind{{counted: counted{kind: half}, weight: 6}, {counted: counted{kind: whole2}, weight: 2}},
		},
		"affinity to every model is no pin": {
			pinned: []pinnedKind{{counted: counted{kind: half, pin: pin{nodes: anyKey}}, match: anyMatch, weight: 6}},
		},
		"pinned to T4 by affinity": {
			pinned: []pinnedKind{{counted: counted{kind: half}, weight: 6}, {counted: counted{kind: whole2, pin: pin{nodes: t4Key}}, match: t4Match, weight: 2}},
			tasks:  []allocator.FragTask{{GPUMilli: 500, GPUs: 1, Weight: 6}, {GPUMilli: 1000, GPUs: 2, Weight: 2, Spec: "T4"}},
		},
		"pinned to T4 or V100 by claims, and to T4 by both": {
			pinned: []pinnedKind{{counted: counted{kind: half, pin: pin{models: "T4|V100"}}, weight: 6},
				{counted: counted{kind: whole2, pin: pin{nodes: t4Key, models: "T4|V100"}}, match: t4Match, weight: 2}},
			tasks: []allocator.FragTask{{GPUMilli: 500, GPUs: 1, Weight: 6, Spec: "T4|V100"}, {GPUMilli: 1000, GPUs: 2, Weight: 2, Spec: "T4"}},
		},
	}
	// Twice over every case, with one cache of what each kind accepts:
	// the second pass takes every kind's from it, so a cache key that
	// left out what tells two cases' kinds apart gives one of them the
	// other's.
	pl.supply.sized = map[acceptsKey]acceptsOut{}
	for pass := range 2 {
		for name, tc := range tests {
			t.Run(fmt.Sprintf("%s/pass %d", name, pass), func(t *testing.T) {
				got := pl.prices(tc.pinned)
				want := allocator.Scarcity(tc.tasks, pl.supply.gpus)
				if !cmp.Equal(want, got, cmpopts.EquateApprox(0, 1e-12), cmpopts.EquateEmpty()) {
					t.Errorf("prices (-simulator's +plugin's):\n%s", cmp.Diff(want, got))
				}
				if len(tc.tasks) > 0 && got["T4"] <= got["A100"] {
					t.Errorf("prices %v: want T4 above A100", got)
				}
			})
		}
	}
}

// TestModelsOfClaimsAndPods: the models a pod's requests accept, and the
// spelling of its node constraints.
func TestModelsOfClaimsAndPods(t *testing.T) {
	for _, tc := range []struct{ a, b, want string }{
		{"", "T4", "T4"}, {"T4|V100", "", "T4|V100"}, {"T4|V100", "A100|V100", "V100"}, {"T4", "V100", noModel}, {noModel, "T4", noModel},
	} {
		if got := intersectModels(tc.a, tc.b); got != tc.want {
			t.Errorf("intersectModels(%q, %q) = %q, want %q", tc.a, tc.b, got, tc.want)
		}
	}
	if allocator.ModelAllowed(noModel, "T4") {
		t.Errorf("noModel allows T4, want no model")
	}
	if got := nodeConstraints(&corev1.Pod{}); got != "" {
		t.Errorf("a pod without constraints spells %q, want \"\"", got)
	}
	a := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: map[string]string{"x": "1", "y": "2"}}}
	b := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: map[string]string{"y": "2", "x": "1"}}}
	c := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: map[string]string{"x": "1"}}}
	if nodeConstraints(a) != nodeConstraints(b) || nodeConstraints(a) == nodeConstraints(c) {
		t.Errorf("constraints spelled %q, %q, %q: want the first two alike, the third apart", nodeConstraints(a), nodeConstraints(b), nodeConstraints(c))
	}
}

// TestSupplyFollowsWhatCanChangeIt: the supply is rebuilt after a Node's
// labels or gpuadmit's annotations change, or a Node comes or goes, not
// after a status update (which a kubelet writes every few seconds on every
// node); a DRA node's GPUs are its gpu devices and the GPUs its MIG
// instances are on.
func TestSupplyFollowsWhatCanChangeIt(t *testing.T) {
	var s supply
	h := s.nodeHandler()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "1"}}}
	h.OnAdd(n, false)
	status := n.DeepCopy()
	status.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	h.OnUpdate(n, status)
	if got := s.changes.Load(); got != 1 {
		t.Errorf("%d changes after an add and a status update, want 1", got)
	}
	labelled := status.DeepCopy()
	labelled.Labels["b"] = "2"
	h.OnUpdate(status, labelled)
	annotated := labelled.DeepCopy()
	annotated.Annotations = map[string]string{allocator.AnnotationGPUs: "[]"}
	h.OnUpdate(labelled, annotated)
	h.OnDelete(annotated)
	if got := s.changes.Load(); got != 4 {
		t.Errorf("%d changes after a label, an annotation and a delete more, want 4", got)
	}

	str := func(v string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &v} }
	dev := func(name, typ, parent string) resourceapi.Device {
		return resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			allocator.DRAAttrType: str(typ), allocator.DRAAttrModel: str("H100-80GB"), allocator.DRAAttrParentUUID: str(parent)}}
	}
	sl := &resourceapi.ResourceSlice{}
	sl.Spec.Pool = resourceapi.ResourcePool{Name: "n", Generation: 1}
	sl.Spec.Devices = []resourceapi.Device{dev("gpu-0", allocator.DRATypeGPU, ""), dev("mig-1-0", allocator.DRATypeMIG, "GPU-1"),
		dev("mig-1-1", allocator.DRATypeMIG, "GPU-1"), dev("mig-2-0", allocator.DRATypeMIG, "GPU-2")}
	if model, gpus, _, ok := sliceGPUs([]*resourceapi.ResourceSlice{sl}); !ok || model != "H100-80GB" || gpus != 3 {
		t.Errorf("sliceGPUs = %q, %d GPUs (%v); want H100-80GB, 3 (one without MIG, two with)", model, gpus, ok)
	}
}
