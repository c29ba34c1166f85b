package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpuadmit/gpuadmit/pkg/claim"
	"github.com/gpuadmit/gpuadmit/pkg/quota"
)

// gpuadmit's two ServiceAccounts (deploy/base): the webhook's, which only
// reads, and the controller's, which writes what gpuadmit owns.
const (
	webhookAccount    = "system:serviceaccount:gpuadmit-system:gpuadmit"
	controllerAccount = "system:serviceaccount:gpuadmit-system:gpuadmit-controller"
	// controllerOnly is how the controller's admission policy starts its refusals.
	controllerOnly = "gpuadmit-controller writes only"
)

// accountClient acts as a ServiceAccount of gpuadmit-system, with the groups its token carries.
func accountClient(t *testing.T, user string) client.Client {
	t.Helper()
	c, err := clientAs(user, []string{"system:serviceaccounts", "system:serviceaccounts:gpuadmit-system", "system:authenticated"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGateLeastPrivilege: each of gpuadmit's parts holds only its own
// powers, under deploy/base's RBAC and the controller's admission policy
// (the cluster installs both, as deploy/base renders them). The webhook's
// account writes no ResourceQuota and no ResourceClaimTemplate; the
// controller's writes the ResourceQuota named gpuadmit (the running
// controller does, as that account) and templates gpuadmit labels, and is
// refused any other quota and an unlabelled template.
func TestGateLeastPrivilege(t *testing.T) {
	ctx := context.Background()
	const ns = "gate-leastpriv"
	makeNamespaces(t, ctx, ns)
	other := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-limits"}}
	other.Spec.Hard = corev1.ResourceList{corev1.ResourcePods: mustQuantity("100")}
	if err := env.Client.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	webhook, controller := accountClient(t, webhookAccount), accountClient(t, controllerAccount)
	waitFor(t, "the controller policy refuses", 30*time.Second, func() (bool, string) {
		err := controller.Create(ctx, rq(ns, "vap-probe"), client.DryRunAll)
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), controllerOnly), "dry-run create: " + errString(err)
	})

	t.Run("the controller writes the gpuadmit quota it reconciles", func(t *testing.T) {
		declareQuota(t, ns)
		owned := quotaReady(t, ctx, ns, 4096) // created by the running controller, as its account
		owned.Spec.Hard[corev1.ResourcePods] = mustQuantity("50")
		if err := controller.Update(ctx, owned.DeepCopy(), client.DryRunAll); err != nil {
			t.Errorf("the controller's update of its quota: %v", err)
		}
		if err := controller.Delete(ctx, owned.DeepCopy(), client.DryRunAll); err != nil {
			t.Errorf("the controller's delete of its quota: %v", err)
		}
		refusedBy(t, "the webhook's update of the gpuadmit quota", webhook.Update(ctx, owned.DeepCopy()), rbacDenial)
		refusedBy(t, "the webhook's delete of the gpuadmit quota", webhook.Delete(ctx, owned.DeepCopy()), rbacDenial)
	})
	t.Run("the webhook writes no quota", func(t *testing.T) {
		refusedBy(t, "create", webhook.Create(ctx, ownedRQ(ns, quota.Name)), rbacDenial)
		refusedBy(t, "update", webhook.Update(ctx, labelled(reread(t, ctx, other))), rbacDenial)
		refusedBy(t, "delete", webhook.Delete(ctx, reread(t, ctx, other)), rbacDenial)
	})
	t.Run("the controller writes no other quota", func(t *testing.T) {
		refusedBy(t, "create", controller.Create(ctx, ownedRQ(ns, "more-gpus")), controllerOnly)
		refusedBy(t, "update", controller.Update(ctx, labelled(reread(t, ctx, other))), controllerOnly)
		refusedBy(t, "delete", controller.Delete(ctx, reread(t, ctx, other)), controllerOnly)
	})
	t.Run("claim templates", func(t *testing.T) {
		mine := claimTemplate(ns, "gate-owned", true)
		refusedBy(t, "the webhook's create", webhook.Create(ctx, mine.DeepCopy()), rbacDenial)
		refusedBy(t, "the controller's unlabelled create", controller.Create(ctx, claimTemplate(ns, "gate-plain", false)), controllerOnly)
		if err := controller.Create(ctx, mine); err != nil {
			t.Fatalf("the controller's create of a labelled template: %v", err)
		}
		refusedBy(t, "the webhook's delete", webhook.Delete(ctx, mine.DeepCopy()), rbacDenial)
		plain := claimTemplate(ns, "gate-admin", false)
		if err := env.Client.Create(ctx, plain); err != nil {
			t.Fatal(err)
		}
		refusedBy(t, "the controller's delete of an unlabelled template", controller.Delete(ctx, plain), controllerOnly)
		if err := controller.Delete(ctx, mine); err != nil {
			t.Errorf("the controller's delete of its template: %v", err)
		}
	})
}

// rbacDenial is how RBAC's refusal of a gpuadmit account starts.
const rbacDenial = `is forbidden: User "system:serviceaccount:gpuadmit-system:`

// refusedBy fails unless err is Forbidden with a message containing by.
func refusedBy(t *testing.T, what string, err error, by string) {
	t.Helper()
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), by) {
		t.Errorf("%s: got %v, want Forbidden with %q", what, errString(err), by)
	}
}

// declareQuota makes the policy set govern ns with 4 GiB of GPU memory, and
// restores the default set when the test ends.
func declareQuota(t *testing.T, ns string) {
	t.Helper()
	dir := filepath.Join(filepath.Dir(policyDir), "quotas-gate")
	decl := "gpuadmit:\n  quotas:\n  - {namespaces: [" + ns + "], gpuMemory: 4Gi}\n"
	if err := writePolicies(dir, map[string]string{"quotas.yaml": decl}); err != nil {
		t.Fatal(err)
	}
	swapPolicies(t, "quotas-gate")
	t.Cleanup(func() { swapPolicies(t, "v1") })
}

func rq(ns, name string) *corev1.ResourceQuota {
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	q.Spec.Hard = corev1.ResourceList{corev1.ResourcePods: mustQuantity("10")}
	return q
}

// ownedRQ carries gpuadmit's label, so only the name can refuse it.
func ownedRQ(ns, name string) *corev1.ResourceQuota {
	return labelled(rq(ns, name))
}

func labelled(q *corev1.ResourceQuota) *corev1.ResourceQuota {
	q.Labels = map[string]string{quota.ManagedBy: "gpuadmit"}
	return q
}

func reread(t *testing.T, ctx context.Context, q *corev1.ResourceQuota) *corev1.ResourceQuota {
	t.Helper()
	out := &corev1.ResourceQuota{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(q), out); err != nil {
		t.Fatal(err)
	}
	return out
}

// claimTemplate is a template of another driver's class (the DRA claims
// policy, where installed, lets it through), labelled as gpuadmit labels
// its own when owned.
func claimTemplate(ns, name string, owned bool) *resourceapi.ResourceClaimTemplate {
	ct := template(ns, name, exactly("other.example.com"))
	if owned {
		ct.Labels = map[string]string{claim.ManagedBy: "gpuadmit"}
	}
	return ct
}
