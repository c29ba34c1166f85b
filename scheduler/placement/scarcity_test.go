package placement_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// productLabel is GPU Feature Discovery's product label, which gpuadmit's
// webhook pins a pod's model by.
const productLabel = "nvidia.com/gpu.product"

// onModels requires a node of one of models, by the product label.
func onModels(p *corev1.Pod, models ...string) *corev1.Pod {
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: productLabel, Operator: corev1.NodeSelectorOpIn, Values: models}}}}}}}
	return p
}

// scarcityCluster is a T4 node and a V100 node, each a DRA node of two
// 16 GiB GPUs labelled with its product; the T4's first GPU has 8 GiB
// held, so that an 8 GiB share fills it exactly, and the best fit is
// there. The workload's pods, pending, are 8 pods of an 8 GiB share, two of
// them made by pinned(name) (pod and claim) and the others unpinned; it
// returns the cluster, the slices and claims, and those pods.
func scarcityCluster(pinned func(name string) (*corev1.Pod, runtime.Object)) (c cluster, claims []runtime.Object, pods []*corev1.Pod) {
	t4, v100 := node("t4"), node("v100")
	t4.Labels, v100.Labels = map[string]string{productLabel: "T4"}, map[string]string{productLabel: "V100"}
	c.add(t4, claimPod("held", "held"))
	c.add(v100)
	claims = []runtime.Object{modelSlice("t4", "T4", 2, 16), modelSlice("v100", "V100", 2, 16), heldClaim("held", "t4", "gpu-0", 8)}
	for i := range 8 {
		name := fmt.Sprintf("w%d", i)
		var p, claim runtime.Object = claimPod(name, name), shareClaim(name, 8)
		if i < 2 {
			p, claim = pinned(name)
		}
		claims, pods = append(claims, claim), append(pods, p.(*corev1.Pod))
	}
	return c, claims, pods
}

// TestScarcityRanksAMultiModelPodWherePinnedPodsDoNotNeedIt: a pod that
// accepts T4 or V100 (by its node affinity, or by its claim's
// alternatives) goes where it fits best, the T4, while the workload's pods
// may run anywhere; once two of the eight are pinned to T4 (by affinity,
// or by a claim selecting T4 only), T4's GPUs are priced at the share of
// them those pods need (2 pods × ½ GPU of 8 pods × ½ GPU, scaled to the
// cluster's 4 GPUs, over T4's 2: 0.5 per milli-GPU, 250 for the share),
// and it is ranked onto the V100. Before, the plugin read no pins and
// never told its placer the supply: the T4 stayed first.
func TestScarcityRanksAMultiModelPodWherePinnedPodsDoNotNeedIt(t *testing.T) {
	byAffinity := func(name string) (*corev1.Pod, runtime.Object) {
		return onModels(claimPod(name, name), "T4", "V100"), shareClaim(name, 8)
	}
	byAlternatives := func(name string) (*corev1.Pod, runtime.Object) {
		return claimPod(name, name), shareAlternatives(name, 8, "T4", "V100")
	}
	unpinned := func(name string) (*corev1.Pod, runtime.Object) { return claimPod(name, name), shareClaim(name, 8) }
	pinByAffinity := func(name string) (*corev1.Pod, runtime.Object) {
		return onModels(claimPod(name, name), "T4"), shareClaim(name, 8)
	}
	pinByClaim := func(name string) (*corev1.Pod, runtime.Object) {
		return claimPod(name, name), shareAlternatives(name, 8, "T4")
	}
	tests := map[string]struct {
		pod    func(name string) (*corev1.Pod, runtime.Object)
		pinned func(name string) (*corev1.Pod, runtime.Object)
		want   string // the node ranked first
	}{
		"no pinned pods, by affinity: the best fit":     {pod: byAffinity, pinned: unpinned, want: "t4"},
		"no pinned pods, by alternatives: the best fit": {pod: byAlternatives, pinned: unpinned, want: "t4"},
		"pinned by affinity, by affinity":               {pod: byAffinity, pinned: pinByAffinity, want: "v100"},
		"pinned by affinity, by alternatives":           {pod: byAlternatives, pinned: pinByAffinity, want: "v100"},
		"pinned by their claims, by affinity":           {pod: byAffinity, pinned: pinByClaim, want: "v100"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, objs, pods := scarcityCluster(tc.pinned)
			p, claim := tc.pod("new")
			e := newEnv(t, "", c, append(objs, claim)...)
			// The pods come once the claim tracker has their claims, as
			// the replay creates them: a pod whose claim it lacks counts
			// only at its next event.
			for _, wp := range pods {
				if _, err := e.client.CoreV1().Pods(wp.Namespace).Create(e.ctx, wp, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			other := map[string]string{"t4": "v100", "v100": "t4"}[tc.want]
			// The informer hands the pods to the plugin's handler
			// asynchronously: wait for the ranking (a pinned workload) or
			// check it holds for a while (an unpinned one).
			var got map[string]int64
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				got, _ = e.scores(t, p)
				if tc.want == "t4" && got["t4"] <= got["v100"] {
					t.Fatalf("scores %v: want t4 above v100", got)
				}
				if tc.want == "v100" && got["v100"] > got["t4"] {
					return
				}
			}
			if got[tc.want] <= got[other] {
				t.Errorf("scores %v: want %s above %s", got, tc.want, other)
			}
		})
	}
}

// TestAFixedWorkloadPricesTheModelsItsKindsName: the cluster of
// scarcityCluster, and a target workload fixed by the args instead of
// derived from pods: 8 kinds' worth of an 8 GiB share, 2 of them accepting
// T4 only. A pod that accepts T4 or V100 is ranked onto the V100, as when
// the same pods are derived (T4 priced at 0.5 per milli-GPU); with the
// kinds accepting any model it goes to its best fit, the T4. Before, a
// fixed workload named no models, so it priced nothing and the T4 stayed
// first whatever the args said.
func TestAFixedWorkloadPricesTheModelsItsKindsName(t *testing.T) {
	const (
		anywhere = `{"gpuMemory":"8Gi","cpu":"1","memory":"1Gi","weight":6}`
		onT4     = `{"gpuMemory":"8Gi","cpu":"1","memory":"1Gi","models":["T4"],"weight":2}`
		onEither = `{"gpuMemory":"8Gi","cpu":"1","memory":"1Gi","models":["T4","V100"],"weight":2}`
	)
	tests := map[string]struct {
		args string
		want string // the node ranked first
	}{
		"no kind names a model: the best fit":    {args: `{"workload":[` + anywhere + `]}`, want: "t4"},
		"kinds naming every model: the best fit": {args: `{"workload":[` + anywhere + `,` + onEither + `]}`, want: "t4"},
		"a quarter of the kinds accept T4 only":  {args: `{"workload":[` + anywhere + `,` + onT4 + `]}`, want: "v100"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, objs, _ := scarcityCluster(func(name string) (*corev1.Pod, runtime.Object) {
				return claimPod(name, name), shareClaim(name, 8)
			})
			p := onModels(claimPod("new", "new"), "T4", "V100")
			got, _ := newEnv(t, tc.args, c, append(objs, shareClaim("new", 8))...).scores(t, p)
			other := map[string]string{"t4": "v100", "v100": "t4"}[tc.want]
			if got[tc.want] <= got[other] {
				t.Errorf("scores %v: want %s above %s", got, tc.want, other)
			}
		})
	}
}
