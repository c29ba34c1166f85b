package mutate

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
	"github.com/gpuadmit/gpuadmit/pkg/poolowner"
)

func migNode(name, product string, alloc map[string]int64) corev1.Node {
	return gpuNode(name, product, map[string]string{inventory.LabelMIGStrategy: "mixed"}, alloc)
}

// The test nodes advertise their accounting capacity, as gpuadmit's agent
// makes GPU nodes do (TestAccountingFailsClosed covers nodes that do not).
var (
	a100Mixed = advertising(migNode("a100", "NVIDIA-A100-SXM4-40GB", map[string]int64{
		"nvidia.com/mig-1g.5gb": 7, "nvidia.com/mig-1g.10gb": 4, "nvidia.com/mig-2g.10gb": 3, "nvidia.com/mig-3g.20gb": 2, "nvidia.com/mig-7g.40gb": 1}))
	h100Mixed = advertising(migNode("h100", "NVIDIA-H100-80GB-HBM3", map[string]int64{
		"nvidia.com/mig-1g.10gb": 7, "nvidia.com/mig-1g.10gb.me": 1, "nvidia.com/mig-1g.20gb": 4, "nvidia.com/mig-3g.40gb": 2, "nvidia.com/mig-7g.80gb": 1}))
	h200Mixed = advertising(migNode("h200", "NVIDIA-H200", map[string]int64{
		"nvidia.com/mig-1g.18gb": 7, "nvidia.com/mig-1g.35gb": 4, "nvidia.com/mig-3g.71gb": 2}))
	a100Single       = advertising(gpuNode("a100s", "NVIDIA-A100-SXM4-40GB-MIG-3g.20gb", map[string]string{inventory.LabelMIGStrategy: "single"}, map[string]int64{"nvidia.com/gpu": 16}))
	t4Shared         = advertising(gpuNode("t4", "Tesla-T4", map[string]string{inventory.LabelMemory: "15360", inventory.LabelCount: "1"}, map[string]int64{"gpuadmit.io/gpu-mem": 15}))
	h100LegacyShared = advertising(gpuNode("h100sh", "NVIDIA-H100-80GB-HBM3", map[string]string{inventory.LabelCount: "1"}, map[string]int64{"gpuadmit.io/gpu-mem": 79}))
	a100Whole        = advertising(gpuNode("a100w", "NVIDIA-A100-SXM4-80GB", map[string]string{inventory.LabelCount: "8"}, map[string]int64{"nvidia.com/gpu": 8}))
)

// TestRealSizes: sizes come from the real MiB, not the name, and the
// resource is spelled as the pool's strategy spells it.
func TestRealSizes(t *testing.T) {
	tests := map[string]struct {
		node   corev1.Node
		limits map[string]string
		want   map[string]string
	}{
		"10240 MiB on A100-40GB is 3g.20gb, never 2g.10gb (9856 MiB)": {a100Mixed, map[string]string{"nvidia.com/gpu": "1", "nvidia.com/gpumem": "10240"}, map[string]string{"nvidia.com/mig-3g.20gb": "1"}},
		"9856 MiB on A100-40GB is 1g.10gb (fewer compute slices)":     {a100Mixed, map[string]string{"nvidia.com/gpumem": "9856"}, map[string]string{"nvidia.com/mig-1g.10gb": "1"}},
		"16000 MiB on H200 is 1g.18gb (16384 MiB)":                    {h200Mixed, map[string]string{"gpuadmit.io/gpu-memory": "16000Mi"}, map[string]string{"nvidia.com/mig-1g.18gb": "1"}},
		"9984 MiB on H100 is 1g.10gb":                                 {h100Mixed, map[string]string{"volcano.sh/vgpu-memory": "9984"}, map[string]string{"nvidia.com/mig-1g.10gb": "1"}},
		"10Gi on H100 skips the 9984 MiB slice":                       {h100Mixed, map[string]string{"gpuadmit.io/gpu-memory": "10Gi"}, map[string]string{"nvidia.com/mig-1g.20gb": "1"}},
		"half an H100 is 4 memory slices: 3g.40gb":                    {h100Mixed, map[string]string{"gpuadmit.io/gpu": "500m"}, map[string]string{"nvidia.com/mig-3g.40gb": "1"}},
		"+me is written .me in the mixed strategy":                    {h100Mixed, map[string]string{"nvidia.com/mig-1g.10gb+me": "1"}, map[string]string{"nvidia.com/mig-1g.10gb.me": "1"}},
		"two GPUs of 3000 MiB are two slices":                         {h100Mixed, map[string]string{"nvidia.com/gpu": "2", "nvidia.com/gpumem": "3000"}, map[string]string{"nvidia.com/mig-1g.10gb": "2"}},
		"single strategy serves its profile as nvidia.com/gpu":        {a100Single, map[string]string{"aliyun.com/gpu-mem": "12"}, map[string]string{"nvidia.com/gpu": "1"}},
		"3000 MiB on a 15 GiB T4 is 3 GiB of share":                   {t4Shared, map[string]string{"nvidia.com/gpumem": "3000"}, map[string]string{"gpuadmit.io/gpu-mem": "3"}},
		"3073 MiB rounds up to 4 GiB":                                 {t4Shared, map[string]string{"nvidia.com/gpumem": "3073"}, map[string]string{"gpuadmit.io/gpu-mem": "4"}},
		"a quarter of a T4 is 4 GiB (3840 MiB rounded up)":            {t4Shared, map[string]string{"nvidia.com/gpumem-percentage": "25"}, map[string]string{"gpuadmit.io/gpu-mem": "4"}},
		"100% of an H100 share pool's GPU is its 79 units, not 80":    {h100LegacyShared, map[string]string{"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "100"}, map[string]string{"gpuadmit.io/gpu-mem": "79"}},
		"nvidia.com/gpu: 2 stays whole":                               {a100Whole, map[string]string{"nvidia.com/gpu": "2"}, map[string]string{"nvidia.com/gpu": "2"}},
		"20 GiB goes whole when only whole GPUs exist":                {a100Whole, map[string]string{"gpuadmit.io/gpu-memory": "20Gi"}, map[string]string{"nvidia.com/gpu": "1"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := mustMutate(t, mutator(tc.node), pod("p", tc.limits))
			if !res.Allowed {
				t.Fatalf("denied: %s", res.Message)
			}
			if diff := cmp.Diff(tc.want, gpuResources(res.Pod.Spec.Containers[0])); diff != "" {
				t.Errorf("resources (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeniedWithWhatWouldBeAccepted(t *testing.T) {
	tests := map[string]struct {
		nodes  []corev1.Node
		limits map[string]string
		want   []string
	}{
		"more than any slice":          {[]corev1.Node{h100Mixed}, map[string]string{"gpuadmit.io/gpu-memory": "90Gi"}, []string{`container "a"`, "gpuadmit.io/gpu-memory=90Gi", "7g.80gb has 81152 MiB"}},
		"a share cannot span two GPUs": {[]corev1.Node{t4Shared}, map[string]string{"nvidia.com/gpu": "2", "nvidia.com/gpumem": "1000"}, []string{"a memory share lives on one GPU"}},
		"more units than one GPU":      {[]corev1.Node{t4Shared}, map[string]string{"aliyun.com/gpu-mem": "16"}, []string{"16 units of 1024 MiB exceed one GPU's 15 units"}},
		"a MIG profile nobody serves":  {[]corev1.Node{h100Mixed}, map[string]string{"nvidia.com/mig-3g.20gb": "1"}, []string{"serves no MIG profile \"3g.20gb\"", "1g.10gb (9984 MiB)"}},
		"no GPU pools at all":          {nil, map[string]string{"nvidia.com/gpu": "1"}, []string{"no GPU pool can serve", "The cluster has no GPU pools", "allocatable nvidia.com/gpu", "nvidia.com/gpu.product", "examples/nodes.yaml"}},
		"invalid request":              {[]corev1.Node{t4Shared}, map[string]string{"nvidia.com/gpu": "0"}, []string{"spec.containers[0].resources.limits[nvidia.com/gpu]", `container "a"`}},
		"more GPUs than a node has":    {[]corev1.Node{a100Whole}, map[string]string{"nvidia.com/gpu": "9"}, []string{"its nodes have at most 8"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := mustMutate(t, mutator(tc.nodes...), pod("p", tc.limits))
			if res.Allowed || len(res.Patch) != 0 {
				t.Fatalf("allowed (patch %v), want a denial", res.Patch)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Message, w) {
					t.Errorf("message %q does not contain %q", res.Message, w)
				}
			}
		})
	}
}

// TestInitContainerArithmetic: a pod needs max(sum of app containers and
// sidecars, largest init container), as Kubernetes counts it.
func TestInitContainerArithmetic(t *testing.T) {
	share := func(units int64) corev1.Node {
		return gpuNode("t4", "Tesla-T4", map[string]string{inventory.LabelMemory: "15360"}, map[string]int64{"gpuadmit.io/gpu-mem": units})
	}
	tests := map[string]struct {
		init    []corev1.Container
		apps    []map[string]string
		units   int64
		allowed bool
	}{
		"init 4 GiB, apps 1+1: needs 4":        {[]corev1.Container{initC("i", "4", nil)}, []map[string]string{gib("1"), gib("1")}, 4, true},
		"init 3 GiB, apps 2+2: needs 4, not 3": {[]corev1.Container{initC("i", "3", nil)}, []map[string]string{gib("2"), gib("2")}, 3, false},
		"sidecar 2 + app 2: needs 4":           {[]corev1.Container{initC("s", "2", always())}, []map[string]string{gib("2")}, 3, false},
		"sidecar 2 + app 2 fits 4":             {[]corev1.Container{initC("s", "2", always())}, []map[string]string{gib("2")}, 4, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := pod("p", tc.apps...)
			p.Spec.InitContainers = tc.init
			res := mustMutate(t, mutator(share(tc.units)), p)
			if res.Allowed != tc.allowed {
				t.Fatalf("allowed = %v, want %v (message %q)", res.Allowed, tc.allowed, res.Message)
			}
			if !tc.allowed && !strings.Contains(res.Message, "gpuadmit.io/gpu-mem=") {
				t.Errorf("denial %q does not say the pod's demand", res.Message)
			}
		})
	}
}

func gib(n string) map[string]string { return map[string]string{"gpuadmit.io/gpu-mem": n} }

func always() *corev1.ContainerRestartPolicy {
	p := corev1.ContainerRestartPolicyAlways
	return &p
}

func initC(name, gi string, restart *corev1.ContainerRestartPolicy) corev1.Container {
	return corev1.Container{Name: name, Image: "busybox", RestartPolicy: restart, Resources: corev1.ResourceRequirements{Limits: list(gib(gi))}}
}

// TestContainersShareOnePool: all GPU containers of a pod land on one node,
// so a pool that serves only some of them is passed over, and the explanation says why.
func TestContainersShareOnePool(t *testing.T) {
	small := migNode("a100", "NVIDIA-A100-SXM4-40GB", map[string]int64{"nvidia.com/mig-1g.5gb": 7})
	res := mustMutate(t, mutator(small, h100Mixed), pod("p", map[string]string{"nvidia.com/gpumem": "3000"}, map[string]string{"nvidia.com/gpumem": "30000"}))
	if !res.Allowed {
		t.Fatal(res.Message)
	}
	got := []map[string]string{gpuResources(res.Pod.Spec.Containers[0]), gpuResources(res.Pod.Spec.Containers[1])}
	want := []map[string]string{{"nvidia.com/mig-1g.10gb": "1"}, {"nvidia.com/mig-3g.40gb": "1"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	if !strings.Contains(res.Explanation, "passed over: pool a100-40gb-mig-mixed") {
		t.Errorf("explanation does not say why the A100 pool was passed over: %s", res.Explanation)
	}
}

func TestUserNodeSelectorExcludesPools(t *testing.T) {
	p := pod("p", map[string]string{"nvidia.com/gpumem": "3000"})
	p.Spec.NodeSelector = map[string]string{inventory.LabelProduct: "NVIDIA-H200"}
	res := mustMutate(t, mutator(h100Mixed, h200Mixed), p)
	if got := gpuResources(res.Pod.Spec.Containers[0]); !res.Allowed || got["nvidia.com/mig-1g.18gb"] != "1" {
		t.Errorf("allowed %v, resources %v, message %q: want the H200 slice the pod's nodeSelector points at", res.Allowed, got, res.Message)
	}
}

func TestPriorityClassClearsAdmissionDefaults(t *testing.T) {
	p := pod("p", map[string]string{"nvidia.com/gpu": "1"})
	p.Labels = map[string]string{"gpuadmit.io/class": "batch"}
	zero, never := int32(0), corev1.PreemptNever
	p.Spec.Priority, p.Spec.PreemptionPolicy = &zero, &never
	res := mustMutate(t, mutator(a100Whole), p)
	s := res.Pod.Spec
	if s.PriorityClassName != "gpuadmit-batch" || s.Priority != nil || s.PreemptionPolicy != nil {
		t.Errorf("priorityClassName %q, priority %v, preemptionPolicy %v; want gpuadmit-batch with the stale values cleared", s.PriorityClassName, s.Priority, s.PreemptionPolicy)
	}
}

func TestNonGPUPodPassesUntouched(t *testing.T) {
	res := mustMutate(t, mutator(h100Mixed), pod("p", map[string]string{"cpu": "1"}))
	if !res.Allowed || len(res.Patch) != 0 || res.Pod.Annotations != nil {
		t.Errorf("allowed %v, patch %v, annotations %v; want allowed untouched", res.Allowed, res.Patch, res.Pod.Annotations)
	}
}

// TestForgedRecordsAreDenied: gpuadmit's annotations on an arriving pod pass
// only when they are exactly what gpuadmit writes for it.
func TestForgedRecordsAreDenied(t *testing.T) {
	m := mutator(h100Mixed, t4Shared)
	genuine := mustMutate(t, m, pod("p", map[string]string{"nvidia.com/gpumem": "3000"})).Pod
	tests := map[string]struct {
		pod  func() *corev1.Pod
		want string
	}{
		"a decision on a fresh pod": {func() *corev1.Pod {
			p := pod("p", map[string]string{"nvidia.com/gpu": "1"})
			p.Annotations = map[string]string{record.AnnotationDecision: "a: all the GPUs"}
			return p
		}, "gpuadmit.io/request is missing"},
		"any reserved annotation": {func() *corev1.Pod {
			p := pod("p", map[string]string{"cpu": "1"})
			p.Annotations = map[string]string{"gpuadmit.io/approved": "yes"}
			return p
		}, "cannot be set by hand"},
		"a bigger slice than recorded": {func() *corev1.Pod {
			p := genuine.DeepCopy()
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: list(map[string]string{"nvidia.com/mig-7g.80gb": "1"}), Requests: list(map[string]string{"nvidia.com/mig-7g.80gb": "1"})}
			return p
		}, "/spec/containers/0/resources"},
		"an edited decision text": {func() *corev1.Pod {
			p := genuine.DeepCopy()
			p.Annotations[record.AnnotationDecision] = "a: approved by ops" + poolowner.RevisionMark + "x"
			return p
		}, "/metadata/annotations/gpuadmit.io~1decision"},
		"a record naming another container": {func() *corev1.Pod {
			p := genuine.DeepCopy()
			p.Annotations[record.AnnotationRequest] = `{"zz":{}}`
			return p
		}, "names containers the pod does not have"},
		"a record that is not JSON": {func() *corev1.Pod {
			p := genuine.DeepCopy()
			p.Annotations[record.AnnotationRequest] = `{`
			return p
		}, "is not gpuadmit's record"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := mustMutate(t, m, tc.pod())
			if res.Allowed {
				t.Fatal("allowed a forged record")
			}
			if !strings.Contains(res.Message, tc.want) || !strings.Contains(res.Message, "gpuadmit's own record") {
				t.Errorf("message %q does not contain %q", res.Message, tc.want)
			}
		})
	}
	if res := mustMutate(t, m, genuine); !res.Allowed || len(res.Patch) != 0 {
		t.Errorf("the genuine pod: allowed %v, patch %v, message %q; want allowed unchanged", res.Allowed, res.Patch, res.Message)
	}
}

// revisionEval answers like the default policies under another revision.
type revisionEval struct{ rev string }

func (r revisionEval) Evaluate(ctx context.Context, in policy.Input) (policy.Decision, error) {
	d, err := defaultEngine.Evaluate(ctx, in)
	d.Revision = r.rev
	return d, err
}

func TestSavedPodUnderANewRevisionKeepsItsRecord(t *testing.T) {
	inv := StaticInventory{Inv: inventory.Build([]corev1.Node{h100Mixed}, nil)}
	old := NewMutator(revisionEval{"git-old"}, inv, MutatorOptions{})
	saved := mustMutate(t, old, pod("p", map[string]string{"nvidia.com/gpumem": "3000"})).Pod
	res := mustMutate(t, NewMutator(revisionEval{"git-new"}, inv, MutatorOptions{}), saved)
	if !res.Allowed || len(res.Patch) != 0 || !strings.HasSuffix(res.Pod.Annotations[record.AnnotationDecision], "revision git-old") {
		t.Errorf("allowed %v, patch %v, decision %q: want the saved pod accepted unchanged", res.Allowed, res.Patch, res.Pod.Annotations[record.AnnotationDecision])
	}
}

// fixedEval returns one decision, or an error.
type fixedEval struct {
	d   policy.Decision
	err error
}

func (f fixedEval) Evaluate(context.Context, policy.Input) (policy.Decision, error) {
	return f.d, f.err
}

func TestPolicyFaults(t *testing.T) {
	inv := StaticInventory{Inv: inventory.Build([]corev1.Node{h100Mixed, t4Shared}, nil)}
	p := pod("p", map[string]string{"nvidia.com/gpumem": "3000"})
	evalErr := errors.New("evaluation timed out")
	if _, err := NewMutator(fixedEval{err: evalErr}, inv, MutatorOptions{}).Mutate(context.Background(), Request{Pod: p}); !errors.Is(err, evalErr) {
		t.Errorf("evaluation error: err = %v, want it returned, not a denial", err)
	}
	stray := policy.Decision{Revision: "r", Placement: map[string][]policy.Candidate{"b": {{Pool: "t4-shared", Backend: "shared", Rule: "oops"}}}}
	if _, err := NewMutator(fixedEval{d: stray}, inv, MutatorOptions{}).Mutate(context.Background(), Request{Pod: p}); err == nil || !strings.Contains(err.Error(), "rule oops") {
		t.Errorf("placement for a non-GPU container: err = %v, want an error naming the rule", err)
	}
	wrong := policy.Decision{Revision: "r", Placement: map[string][]policy.Candidate{"a": {
		{Pool: "gone", Backend: "mig", Rule: "r1"},
		{Pool: "t4-shared", Backend: "mig", Rule: "r2"},
	}}}
	res, err := NewMutator(fixedEval{d: wrong}, inv, MutatorOptions{}).Mutate(context.Background(), Request{Pod: p})
	if err != nil || res.Allowed {
		t.Fatalf("allowed %v, err %v; want a denial", res.Allowed, err)
	}
	for _, w := range []string{"pool gone: not in the inventory", "rule r2", "the pool is shared"} {
		if !strings.Contains(res.Message, w) {
			t.Errorf("message %q does not contain %q", res.Message, w)
		}
	}
}
