package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpuadmit/gpuadmit/pkg/webhook"
)

// TestDeniedControllerPodEvent: the ReplicaSet controller's pods have only a
// generateName when gpuadmit denies them, and never exist; the GPUDenied
// Event regards the ReplicaSet (which `kubectl describe rs` shows), not a
// pod name no object has.
func TestDeniedControllerPodEvent(t *testing.T) {
	ctx := context.Background()
	rs := impossibleReplicaSet("team-a", "too-many-gpus")
	if err := env.Client.Create(ctx, rs); err != nil {
		t.Fatalf("step create ReplicaSet: %v", err)
	}
	defer env.Client.Delete(ctx, rs, client.PropagationPolicy(metav1.DeletePropagationBackground))
	var denied []eventsv1.Event
	waitFor(t, "a GPUDenied Event in team-a", 30*time.Second, func() (bool, string) {
		denied = gpuDenied(t, ctx, "team-a", rs.Name)
		return len(denied) > 0, "none yet"
	})
	for _, e := range denied {
		r := e.Regarding
		if r.Kind != "ReplicaSet" || r.Name != rs.Name || r.UID != rs.UID || r.Namespace != "team-a" {
			t.Errorf("GPUDenied Event regards %s %s/%s (uid %s), want ReplicaSet team-a/%s (uid %s)", r.Kind, r.Namespace, r.Name, r.UID, rs.Name, rs.UID)
		}
	}
}

// impossibleReplicaSet runs one pod asking for more GPUs than any node has.
func impossibleReplicaSet(ns, name string) *appsv1.ReplicaSet {
	labels := map[string]string{"app": name}
	pod := gpuPod(ns, "", map[string]string{"nvidia.com/gpu": "64"})
	rs := &appsv1.ReplicaSet{}
	rs.Namespace, rs.Name = ns, name
	rs.Spec.Replicas = ptr.To[int32](1)
	rs.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
	rs.Spec.Template = corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod.Spec}
	return rs
}

// gpuDenied lists gpuadmit's GPUDenied Events in ns about an object whose
// name starts with prefix: the ReplicaSet, or a pod name made from it.
func gpuDenied(t *testing.T, ctx context.Context, ns, prefix string) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Reason == webhook.ReasonDenied && strings.HasPrefix(e.Regarding.Name, prefix) {
			out = append(out, e)
		}
	}
	return out
}
