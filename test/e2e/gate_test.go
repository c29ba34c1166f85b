package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpuadmit/gpuadmit/pkg/agent/dra"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

const (
	implicitPrefix = "deviceclass.resource.kubernetes.io/"
	implicitGPU    = implicitPrefix + dra.ClassGPU
	implicitShare  = implicitPrefix + dra.ClassShare
	implicitOther  = implicitPrefix + "fpga.example.com"
)

// TestGateImplicitDeviceClassName: every DeviceClass is also the extended
// resource deviceclass.resource.kubernetes.io/<class> (KEP-5004, GA in
// 1.37). Such a pod reaches gpuadmit through the real API server's
// matchConditions: gpuadmit's whole-GPU class is decided as whole GPUs and
// rewritten, its share class is denied at the field, another driver's
// class passes unchanged.
func TestGateImplicitDeviceClassName(t *testing.T) {
	ctx := context.Background()
	ns := draNamespace(t, ctx, "gate")
	whole := gpuPod(ns, "whole", map[string]string{implicitGPU: "1"})
	waitFor(t, "a whole-GPU pool in the inventory", 30*time.Second, func() (bool, string) {
		err := env.Client.Create(ctx, whole.DeepCopy(), client.DryRunAll)
		return err == nil, errString(err)
	})
	if err := env.Client.Create(ctx, whole); err != nil {
		t.Fatalf("gpuadmit's whole-GPU class by its implicit name: %v", err)
	}
	got := stored(t, ctx, whole)
	lim := got.Spec.Containers[0].Resources.Limits
	if _, left := lim[implicitGPU]; left || lim.Name("nvidia.com/gpu", resource.DecimalSI).Value() != 1 {
		t.Errorf("limits %v, want nvidia.com/gpu: 1 in place of %s", lim, implicitGPU)
	}
	if got.Annotations[record.AnnotationDecision] == "" {
		t.Errorf("no decision record: %v", got.Annotations)
	}

	err := env.Client.Create(ctx, gpuPod(ns, "share", map[string]string{implicitShare: "1"}))
	for _, want := range []string{`container "main"`, "spec.containers[0].resources.limits[" + implicitShare + "]", "gpuadmit.io/gpu-memory"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the share class by its implicit name: err = %v, want a denial containing %q", err, want)
		}
	}

	other := gpuPod(ns, "other", map[string]string{implicitOther: "1"})
	if err := env.Client.Create(ctx, other); err != nil {
		t.Fatalf("another driver's class: %v", err)
	}
	got = stored(t, ctx, other)
	if q := got.Spec.Containers[0].Resources.Limits[implicitOther]; q.Value() != 1 || len(got.Annotations) > 0 {
		t.Errorf("another driver's class: limits %v, annotations %v; want it as written", got.Spec.Containers[0].Resources.Limits, got.Annotations)
	}
	deleteAll(ctx, ns, whole, other)
}

// TestGateImplicitNameQuota: why gpuadmit's quota does not set
// requests.deviceclass.resource.kubernetes.io/<class>: 0 for its classes.
// The API server accepts the key, but counts every claim of the class
// against it (claimEvaluator.addExtendedResourceQuota), not only pods'
// implicit requests: a 0 would refuse the claims gpuadmit's own templates
// and the scheduler write for the pods gpuadmit admits. If this test starts
// failing, the key may have become usable as a second line.
// TestGateImplicitNameOutsideTheWebhook: a pod the webhook never sees (here
// in kube-system, which its configuration excludes) asking for gpuadmit's
// class by its implicit name is refused by deploy/dra's
// implicit-names policy in the real API server; another driver's class
// passes there, and a pod the webhook rewrote passes the policy.
func TestGateImplicitNameOutsideTheWebhook(t *testing.T) {
	ctx := context.Background()
	installDRAPolicies(t, ctx)
	var err error
	waitFor(t, "the implicit-names policy to refuse", 30*time.Second, func() (bool, string) {
		err = env.Client.Create(ctx, gpuPod("kube-system", "implicit", map[string]string{implicitGPU: "1"}), client.DryRunAll)
		return apierrors.IsForbidden(err), "dry-run create: " + errString(err)
	})
	for _, want := range []string{"container main asks for " + implicitGPU, "did not decide"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q, want it to say %q", err, want)
		}
	}
	if err := env.Client.Create(ctx, gpuPod("kube-system", "other", map[string]string{implicitOther: "1"}), client.DryRunAll); err != nil {
		t.Errorf("another driver's class in kube-system: %v", err)
	}
	ns := draNamespace(t, ctx, "gate-vap")
	whole := gpuPod(ns, "whole", map[string]string{implicitGPU: "1"})
	waitFor(t, "the webhook to rewrite the implicit name, and the policy to let it pass", 30*time.Second, func() (bool, string) {
		err := env.Client.Create(ctx, whole.DeepCopy(), client.DryRunAll)
		return err == nil, errString(err)
	})
}

func TestGateImplicitNameQuota(t *testing.T) {
	ctx := context.Background()
	ns := draNamespace(t, ctx, "gate-quota")
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "implicit"}}
	q.Spec.Hard = corev1.ResourceList{
		corev1.ResourceName("requests." + implicitGPU):   resource.MustParse("0"),
		corev1.ResourceName("requests." + implicitShare): resource.MustParse("0"),
	}
	if err := env.Client.Create(ctx, q); err != nil {
		t.Fatalf("a ResourceQuota on the implicit names: %v", err)
	}
	waitFor(t, "the quota's status", 30*time.Second, func() (bool, string) {
		_ = env.Client.Get(ctx, client.ObjectKeyFromObject(q), q)
		return len(q.Status.Hard) == 2, "status.hard is not computed yet"
	})
	rec, err := reconciler()
	if err != nil {
		t.Fatal(err)
	}
	for _, class := range []string{dra.ClassGPU, dra.ClassShare} {
		err := rec.Create(ctx, newClaim(ns, strings.Split(class, ".")[0], exactly(class)))
		if !isQuotaDenial(err) || !strings.Contains(err.Error(), "requests."+implicitPrefix+class) {
			t.Errorf("a claim of %s by gpuadmit's reconciler under requests.%s%s: 0: err = %v, want a quota denial on that key",
				class, implicitPrefix, class, errString(err))
		}
	}
}

// stored is the pod as the API server keeps it.
func stored(t *testing.T, ctx context.Context, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	out := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), out); err != nil {
		t.Fatal(err)
	}
	return out
}
