package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpuadmit/gpuadmit/pkg/mutate"
)

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

// TestEveryDialectIsScheduledOntoItsPool creates the README's example pods
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
	for name, node := range want {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := readPod(t, filepath.Join(root, "examples/pods", name+".yaml"))
			if err := env.Client.Create(ctx, p); err != nil {
				t.Fatalf("step create: %v", err)
			}
			defer deleteAll(ctx, p.Namespace, p)
			got := scheduledNode(t, ctx, p)
			if !strings.HasPrefix(got, node) {
				t.Errorf("scheduled on %s, want %s*; decision %q", got, node, p.Annotations[mutate.AnnotationDecision])
			}
			checkPriority(t, ctx, p)
		})
	}
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
