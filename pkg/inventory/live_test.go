package inventory_test

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// eventLog is an events.EventRecorder that keeps what it was given.
type eventLog struct{ notes []string }

func (e *eventLog) Eventf(regarding runtime.Object, _ runtime.Object, typ, reason, _ string, note string, args ...any) {
	n := regarding.(*corev1.Node)
	e.notes = append(e.notes, typ+" "+reason+" "+n.Name)
}

func TestLiveRecordsARefusedNodeOnce(t *testing.T) {
	bad := node("both-0", map[string]string{inventory.LabelProduct: h100}, map[string]string{"nvidia.com/gpu": "8", "gpuadmit.io/gpu-mem": "64"})
	good := node("whole-0", map[string]string{inventory.LabelProduct: h100}, map[string]string{"nvidia.com/gpu": "8"})
	c := fake.NewClientBuilder().WithObjects(&bad, &good).Build()
	ev := &eventLog{}
	live := inventory.NewLive(c, nil, logr.Discard())
	live.Events = ev
	h := live.Handler()

	live.Inventory()
	h.OnAdd(&good, false) // a change elsewhere rebuilds; the refusal is not news
	live.Rebuild()
	if got := strings.Join(ev.notes, "; "); got != "Warning GPUNodeRefused both-0" {
		t.Errorf("events = %q, want one GPUNodeRefused for both-0", got)
	}
}

func TestLiveRebuildsWhenTheAgentAnnotationChanges(t *testing.T) {
	n := node("h100-s-0", map[string]string{inventory.LabelProduct: h100}, map[string]string{"gpuadmit.io/gpu-mem": "64"})
	c := fake.NewClientBuilder().WithObjects(&n).Build()
	live := inventory.NewLive(c, nil, logr.Discard())
	if p := live.Inventory().Pools[0]; p.SharesPerGPU != 0 {
		t.Fatalf("SharesPerGPU = %d before the offer, want 0", p.SharesPerGPU)
	}
	updated := withOffer(*n.DeepCopy(), offer8)
	if err := c.Update(context.Background(), &updated); err != nil {
		t.Fatal(err)
	}
	live.Handler().OnUpdate(&n, &updated)
	if p := live.Rebuild().Pools[0]; p.SharesPerGPU != 8 {
		t.Errorf("SharesPerGPU = %d after the agent published its offer, want 8 (annotation changes must rebuild)", p.SharesPerGPU)
	}
}

// A cordon changes nothing but spec.unschedulable, and the pool's node must
// then say it takes no pods.
func TestLiveRebuildsWhenANodeIsCordoned(t *testing.T) {
	n := node("h100-0", map[string]string{inventory.LabelProduct: h100}, map[string]string{"nvidia.com/gpu": "8"})
	c := fake.NewClientBuilder().WithObjects(&n).Build()
	live := inventory.NewLive(c, nil, logr.Discard())
	if down := live.Inventory().Pools[0].Nodes[0].Down; down != nil {
		t.Fatalf("Down = %v before the cordon, want none", down)
	}
	cordoned := *n.DeepCopy()
	cordoned.Spec.Unschedulable = true
	if err := c.Update(context.Background(), &cordoned); err != nil {
		t.Fatal(err)
	}
	live.Handler().OnUpdate(&n, &cordoned)
	want := []corev1.Taint{{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}}
	if diff := cmp.Diff(want, live.Rebuild().Pools[0].Nodes[0].Down); diff != "" {
		t.Errorf("Down after the cordon (-want +got):\n%s", diff)
	}
}
