package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

// TestResourceQuotaOnARewrittenResource: the API server's ResourceQuota runs
// after mutating webhooks, so it counts the MIG slice gpuadmit wrote, and
// rejects the pod that would exceed it with its own message.
func TestResourceQuotaOnARewrittenResource(t *testing.T) {
	ctx := context.Background()
	q := &corev1.ResourceQuota{}
	q.Namespace, q.Name = "quota", "mig"
	q.Spec.Hard = corev1.ResourceList{"requests.nvidia.com/mig-1g.10gb": mustQuantity("1")}
	if err := env.Client.Create(ctx, q); err != nil {
		t.Fatalf("step create quota: %v", err)
	}
	defer env.Client.Delete(ctx, q)
	waitFor(t, "quota status computed", 30*time.Second, func() (bool, string) {
		_ = env.Client.Get(ctx, client.ObjectKeyFromObject(q), q)
		return len(q.Status.Hard) > 0, "resourcequota controller has not filled status.hard"
	})
	first := h100Pod("quota", "first")
	if err := env.Client.Create(ctx, first); err != nil {
		t.Fatalf("step first pod: %v", err)
	}
	defer deleteAll(ctx, "quota", first)
	if got := first.Spec.Containers[0].Resources.Limits["nvidia.com/mig-1g.10gb"]; got.Value() != 1 {
		t.Fatalf("first pod limits %v, want the rewritten nvidia.com/mig-1g.10gb: 1", first.Spec.Containers[0].Resources.Limits)
	}
	err := env.Client.Create(ctx, h100Pod("quota", "second"))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota: mig") || !strings.Contains(err.Error(), "requests.nvidia.com/mig-1g.10gb=1") {
		t.Errorf("second pod: err = %v, want the API server's exceeded quota error on requests.nvidia.com/mig-1g.10gb", err)
	}
}

// h100Pod asks for 3000 MiB on an H100: gpuadmit writes nvidia.com/mig-1g.10gb.
func h100Pod(ns, name string) *corev1.Pod {
	p := gpuPod(ns, name, map[string]string{"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"})
	p.Annotations = map[string]string{"gpuadmit.io/model": "H100-80GB"}
	return p
}

// TestWebhookOutage: with gpuadmit down, failurePolicy Fail rejects GPU pods
// (matchConditions send only them), non-GPU pods are still created, and GPU
// pods are admitted again once gpuadmit is back.
func TestWebhookOutage(t *testing.T) {
	ctx := context.Background()
	env.StopWebhook()
	restarted := false
	defer func() {
		if !restarted {
			_ = env.StartWebhook(ctx)
		}
	}()
	err := env.Client.Create(ctx, h100Pod("team-a", "outage-gpu"))
	if err == nil || !strings.Contains(err.Error(), `failed calling webhook "pods.mutate.gpuadmit.io"`) {
		t.Errorf("GPU pod while gpuadmit is down: err = %v, want the API server's failed-calling-webhook rejection", err)
	}
	plain := &corev1.Pod{}
	plain.Namespace, plain.Name = "team-a", "outage-plain"
	plain.Spec.Containers = []corev1.Container{{Name: "main", Image: "busybox"}}
	if err := env.Client.Create(ctx, plain); err != nil {
		t.Errorf("non-GPU pod while gpuadmit is down: %v", err)
	}
	defer deleteAll(ctx, "team-a", plain)
	if err := env.StartWebhook(ctx); err != nil {
		t.Fatalf("step restart webhook: %v", err)
	}
	restarted = true
	back := h100Pod("team-a", "outage-back")
	if err := env.Client.Create(ctx, back); err != nil {
		t.Fatalf("GPU pod after restart: %v", err)
	}
	deleteAll(ctx, "team-a", back)
}

// TestDryRunAndReapply: a server-side dry run returns the mutated pod and
// stores nothing; a saved mutated pod applied again is accepted unchanged.
func TestDryRunAndReapply(t *testing.T) {
	ctx := context.Background()
	p := h100Pod("team-a", "dry")
	if err := env.Client.Create(ctx, p, client.DryRunAll); err != nil {
		t.Fatalf("step dry run: %v", err)
	}
	if _, ok := p.Annotations[record.AnnotationDecision]; !ok || p.Spec.Containers[0].Resources.Limits["nvidia.com/mig-1g.10gb"] == (mustQuantity("0")) {
		t.Errorf("dry run returned an unmutated pod: %v %v", p.Annotations, p.Spec.Containers[0].Resources)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("after a dry run: get = %v, want NotFound", err)
	}

	saved := h100Pod("team-a", "saved")
	if err := env.Client.Create(ctx, saved); err != nil {
		t.Fatalf("step create: %v", err)
	}
	if err := env.Client.Delete(ctx, saved, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	if saved.Annotations[record.AnnotationMAC] == "" {
		t.Errorf("the admitted pod carries no %s: the webhook runs with a record key and seals", record.AnnotationMAC)
	}
	waitGone(t, ctx, saved)
	again := saved.DeepCopy()
	again.ResourceVersion, again.UID, again.CreationTimestamp, again.ManagedFields, again.Status = "", types.UID(""), saved.CreationTimestamp, nil, corev1.PodStatus{}
	again.CreationTimestamp.Reset()
	if err := env.Client.Create(ctx, again); err != nil {
		t.Fatalf("re-applying the saved mutated pod: %v", err)
	}
	defer deleteAll(ctx, "team-a", again)
	// Within the seal window the saved pod passes as it stands; past it
	// (a slow run) it is decided again, the same, and only its seal is new.
	if !equality.Semantic.DeepEqual(unsealed(again.Annotations), unsealed(saved.Annotations)) || !equality.Semantic.DeepEqual(again.Spec.Containers[0].Resources, saved.Spec.Containers[0].Resources) ||
		!equality.Semantic.DeepEqual(again.Spec.Tolerations, saved.Spec.Tolerations) || !equality.Semantic.DeepEqual(again.Spec.NodeSelector, saved.Spec.NodeSelector) {
		t.Errorf("re-applied pod changed:\nannotations %v\n      saved %v\nresources %v\n    saved %v", again.Annotations, saved.Annotations, again.Spec.Containers[0].Resources, saved.Spec.Containers[0].Resources)
	}
}

// unsealed is annotations without the seal (gpuadmit.io/written and gpuadmit.io/mac).
func unsealed(annotations map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range annotations {
		if k != record.AnnotationMAC && k != record.AnnotationWritten {
			out[k] = v
		}
	}
	return out
}

func waitGone(t *testing.T, ctx context.Context, p *corev1.Pod) {
	t.Helper()
	waitFor(t, "delete "+p.Name, 30*time.Second, func() (bool, string) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{})
		return apierrors.IsNotFound(err), "still there"
	})
}

// TestForgedDecisionIsDenied on CREATE (mutating webhook) and UPDATE
// (deploy/base/recordpolicy.yaml's ValidatingAdmissionPolicy).
func TestForgedDecisionIsDenied(t *testing.T) {
	ctx := context.Background()
	forged := h100Pod("team-a", "forged")
	forged.Annotations[record.AnnotationDecision] = "main: everything -> nvidia.com/gpu=8"
	err := env.Client.Create(ctx, forged)
	if err == nil || !strings.Contains(err.Error(), "gpuadmit's own record") {
		t.Errorf("CREATE with a forged decision: err = %v, want gpuadmit's denial", err)
	}
	real := h100Pod("team-a", "genuine")
	if err := env.Client.Create(ctx, real); err != nil {
		t.Fatalf("step create: %v", err)
	}
	defer deleteAll(ctx, "team-a", real)
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"gpuadmit.io/decision":"main: 8 GPUs"}}}`))
	err = env.Client.Patch(ctx, real.DeepCopy(), patch)
	if err == nil || !strings.Contains(err.Error(), "cannot be added, changed or removed") {
		t.Errorf("UPDATE of the decision: err = %v, want the record policy's denial", err)
	}
	label := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"a"}}}`))
	if err := env.Client.Patch(ctx, real.DeepCopy(), label); err != nil {
		t.Errorf("an unrelated label change was refused: %v", err)
	}
}

// TestRecordGuardDuringOutage: with gpuadmit down, a mutated pod's updates
// still go through (a controller removing its finalizer, a label added),
// because the record is guarded by a ValidatingAdmissionPolicy in the API
// server, not by a webhook; editing the record is still refused.
func TestRecordGuardDuringOutage(t *testing.T) {
	ctx := context.Background()
	p := h100Pod("team-a", "outage-update")
	p.Finalizers = []string{"example.com/keep"}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatalf("step create: %v", err)
	}
	defer deleteAll(ctx, "team-a", p)
	env.StopWebhook()
	defer func() {
		if err := env.StartWebhook(ctx); err != nil {
			t.Errorf("step restart webhook: %v", err)
		}
	}()
	updates := map[string]string{
		"a label added":       `{"metadata":{"labels":{"team":"a"}}}`,
		"the finalizer gone":  `{"metadata":{"finalizers":null}}`,
		"the decision edited": `{"metadata":{"annotations":{"gpuadmit.io/decision":"main: 8 GPUs"}}}`,
	}
	for _, name := range []string{"a label added", "the finalizer gone"} {
		if err := env.Client.Patch(ctx, p.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(updates[name]))); err != nil {
			t.Errorf("%s while gpuadmit is down: %v", name, err)
		}
	}
	err := env.Client.Patch(ctx, p.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(updates["the decision edited"])))
	if err == nil || !strings.Contains(err.Error(), "cannot be added, changed or removed") {
		t.Errorf("the decision edited while gpuadmit is down: err = %v, want the record policy's denial", err)
	}
	err = env.Client.Patch(ctx, p.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"gpuadmit.io/managed":null}}}`)))
	if err == nil || !strings.Contains(err.Error(), "gpuadmit.io/managed") {
		t.Errorf("the managed label removed: err = %v, want the record policy's denial", err)
	}
}
