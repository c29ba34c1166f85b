package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestGlobalDefaultPriorityClass: with a globalDefault PriorityClass, the API
// server's Priority plugin writes it into every pod before gpuadmit runs; a
// GPU pod of class training is still admitted, with the class's
// PriorityClass (team-a runs training as team-a-training, value 2000), not
// denied as if its author had chosen the default.
func TestGlobalDefaultPriorityClass(t *testing.T) {
	ctx := context.Background()
	def := &schedulingv1.PriorityClass{Value: 5, GlobalDefault: true, Description: "e2e: the cluster's default"}
	def.Name = "e2e-cluster-default"
	if err := env.Client.Create(ctx, def); err != nil {
		t.Fatalf("step create the default class: %v", err)
	}
	// Every other test's pods would get it too: it goes at the end of this one.
	defer env.Client.Delete(ctx, def)
	waitFor(t, "the API server fills the default", 30*time.Second, func() (bool, string) {
		p := &corev1.Pod{}
		p.Namespace, p.Name = "team-a", "default-probe"
		p.Spec.Containers = []corev1.Container{{Name: "main", Image: "busybox"}}
		if err := env.Client.Create(ctx, p, client.DryRunAll); err != nil {
			return false, err.Error()
		}
		return p.Spec.PriorityClassName == def.Name, fmt.Sprintf("a pod without a class gets %q", p.Spec.PriorityClassName)
	})
	p := h100Pod("team-a", "default-class")
	p.Labels = map[string]string{"gpuadmit.io/class": "training"}
	// gpuadmit's PriorityClass informer may see the new class a moment after the API server.
	waitFor(t, "create the training pod", 30*time.Second, func() (bool, string) {
		err := env.Client.Create(ctx, p.DeepCopy())
		return err == nil, fmt.Sprint(err)
	})
	defer deleteAll(ctx, "team-a", p)
	got := readBack(t, ctx, p.Name)
	if got.Spec.PriorityClassName != "team-a-training" || got.Spec.Priority == nil || *got.Spec.Priority != 2000 {
		t.Errorf("priorityClassName %q, priority %v; want team-a-training at 2000", got.Spec.PriorityClassName, ptr.Deref(got.Spec.Priority, -1))
	}
}
