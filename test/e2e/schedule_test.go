package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpuadmit/gpuadmit/pkg/mutate"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

// TestEveryDialectIsScheduledOntoItsPool creates docs/dialects.md's example pods
// through the API server: gpuadmit mutates them, the API server validates the
// extended resources it wrote, and kube-scheduler binds each to a node of the
// pool gpuadmit chose, which is the pool the example means.
func TestEveryDialectIsScheduledOntoItsPool(t *testing.T) {
	ctx := context.Background()
	want := map[string]string{ // example → the node its pool has in examples/nodes.yaml
		"hami-memory":     "a100-single-0",
		"gpushare":        "a100-single-0",
		"native-memory":   "h200-mig-0",
		"mig-profile":     "h200-mig-0",
		"volcano":         "h200-mig-0",
		"native-fraction": "h100-mig-",
		"kai-fraction":    "t4-shared-0",
		"nvidia-whole":    "a100-80g-0",
	}
	// The examples every model can serve run first, those only some
	// models serve after them: once one of the latter is cached, the
	// webhook's pick (--pool-pick=expected) may leave its model to it, and
	// a flexible example's pool would depend on the order the subtests ran in.
	for _, phase := range [][]string{{"hami-memory", "gpushare", "native-memory", "native-fraction"}, {"mig-profile", "volcano", "kai-fraction", "nvidia-whole"}} {
		t.Run(strings.Join(phase, ","), func(t *testing.T) { runExamples(t, ctx, phase, want) })
	}
}

// runExamples creates the example pods named, in parallel, and checks each
// runs on a node of the pool want names for it.
func runExamples(t *testing.T, ctx context.Context, names []string, want map[string]string) {
	for _, name := range names {
		node := want[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := readPod(t, filepath.Join(root, "examples/pods", name+".yaml"))
			if err := env.Client.Create(ctx, p); err != nil {
				t.Fatalf("step create: %v", err)
			}
			defer deleteAll(ctx, p.Namespace, p)
			defer func() {
				if t.Failed() { // name what holds the node, should an earlier test have left pods there
					t.Logf("pods on %s*: %s", node, podsOn(ctx, node))
				}
			}()
			got := scheduledNode(t, ctx, p)
			if !strings.HasPrefix(got, node) {
				t.Errorf("scheduled on %s, want %s*; decision %q", got, node, p.Annotations[record.AnnotationDecision])
			}
			checkPriority(t, ctx, p)
		})
	}
}

// podsOn lists the pods bound to the nodes whose names start with prefix.
func podsOn(ctx context.Context, prefix string) []string {
	var pods corev1.PodList
	if err := env.Client.List(ctx, &pods); err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Spec.NodeName, prefix) {
			out = append(out, p.Namespace+"/"+p.Name+" on "+p.Spec.NodeName)
		}
	}
	return out
}

// checkPriority: the PriorityClass gpuadmit named exists, and the API
// server's Priority plugin resolved it (it re-runs after the webhook).
func checkPriority(t *testing.T, ctx context.Context, p interface{ GetName() string }) {
	t.Helper()
	pod := readBack(t, ctx, p.GetName())
	if pod.Spec.PriorityClassName == "" {
		t.Fatalf("no priorityClassName on %s", pod.Name)
	}
	pc := &schedulingv1.PriorityClass{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: pod.Spec.PriorityClassName}, pc); err != nil {
		t.Fatalf("PriorityClass %s: %v", pod.Spec.PriorityClassName, err)
	}
	if pod.Spec.Priority == nil || *pod.Spec.Priority != pc.Value {
		t.Errorf("spec.priority = %v, want %d from PriorityClass %s", pod.Spec.Priority, pc.Value, pc.Name)
	}
}

// TestOneWebhookCallPerPod: gpuadmit writes the priority of the
// PriorityClass it names, so the API server's Priority plugin, run again
// after the webhook, changes nothing and the API server does not call
// gpuadmit a second time (reinvocationPolicy IfNeeded).
func TestOneWebhookCallPerPod(t *testing.T) {
	ctx := context.Background()
	p := readPod(t, filepath.Join(root, "examples/pods", "nvidia-whole.yaml"))
	p.Name += "-once"
	before := webhookMetrics(t, ctx)
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatalf("step create: %v", err)
	}
	defer deleteAll(ctx, p.Namespace, p)
	calls := webhookMetrics(t, ctx)["count"] - before["count"]
	if calls != 1 {
		t.Errorf("the API server called gpuadmit %v times for one pod, want 1", calls)
	}
	checkPriority(t, ctx, p)
}

// TestPodsBoundToANodeGetThatNodesPool: a pod that already names its node
// (spec.nodeName, as a custom binder writes it) or is kept to it by required
// node affinity on metadata.name (as the DaemonSet controller writes it) is
// placed on the pool of that node. 3000 MiB would otherwise go to the
// smallest MIG slice, on the A100 MIG node, where neither pod can run.
func TestPodsBoundToANodeGetThatNodesPool(t *testing.T) {
	ctx := context.Background()
	bound := gpuPod("team-a", "bound-to-t4", map[string]string{"nvidia.com/gpumem": "3000"})
	bound.Spec.NodeName = "t4-shared-0"
	daemon := gpuPod("team-a", "daemon-on-t4", map[string]string{"nvidia.com/gpumem": "3000"})
	daemon.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"t4-shared-0"}}}}}}}}
	for _, p := range []*corev1.Pod{bound, daemon} {
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatalf("create %s: %v", p.Name, err)
		}
		defer deleteAll(ctx, "team-a", p)
		if got := p.Spec.Containers[0].Resources.Limits["gpuadmit.io/gpu-mem"]; got.IsZero() {
			t.Errorf("%s got %v, want a share of the T4 node's pool; decision %q", p.Name, p.Spec.Containers[0].Resources.Limits, p.Annotations[record.AnnotationDecision])
		}
		if n := scheduledNode(t, ctx, p); n != "t4-shared-0" {
			t.Errorf("%s runs on %q, want t4-shared-0", p.Name, n)
		}
	}
}

// TestFallbackWhenTheFirstPoolIsFull: 80000 MiB goes first to a 7g.80gb
// slice of the H100 pool, which has two (on h100-mig-0). Two pods take
// them and kwok runs them; the third falls back to the next candidate, the
// H200's 7g.141gb slice, and is scheduled there. Looking at allocatable
// only, gpuadmit pinned it to the full pool, where it stayed Pending. (The
// explanation's wording is tested in pkg/webhook: the GPUFallback Event of a
// named pod regards its Namespace, and the events library folds it into the
// series of an earlier fallback there, keeping that one's note.)
func TestFallbackWhenTheFirstPoolIsFull(t *testing.T) {
	ctx := context.Background()
	var pods []*corev1.Pod
	for _, name := range []string{"fill-h100-a", "fill-h100-b", "falls-back"} {
		p := gpuPod("team-a", name, map[string]string{"gpuadmit.io/gpu-memory": "80000Mi"})
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatalf("step create %s: %v", name, err)
		}
		defer deleteAll(ctx, "team-a", p)
		pods = append(pods, p)
	}
	for _, p := range pods[:2] {
		if n := scheduledNode(t, ctx, p); n != "h100-mig-0" {
			t.Errorf("%s runs on %q, want h100-mig-0; decision %q", p.Name, n, p.Annotations[record.AnnotationDecision])
		}
	}
	last := pods[2]
	if got := mutate.PoolOf(last); got != "h200-141gb-mig-mixed" {
		t.Errorf("the third pod went to pool %q, want h200-141gb-mig-mixed; decision %q", got, last.Annotations[record.AnnotationDecision])
	}
	if n := scheduledNode(t, ctx, last); n != "h200-mig-0" {
		t.Errorf("the third pod runs on %q, want h200-mig-0", n)
	}
}
