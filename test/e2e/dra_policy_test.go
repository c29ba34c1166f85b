package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpuadmit/gpuadmit/pkg/agent/dra"
	"github.com/gpuadmit/gpuadmit/pkg/claim"
)

// deploy/dra's ValidatingAdmissionPolicies on the real API server: claims and
// claim templates of gpuadmit's DeviceClasses come only from gpuadmit
// (claims-policy.yaml), and the DRA agent writes only its own node's
// ResourceSlices of its own driver (own-node-policy.yaml).

// The identities the policies name.
const (
	reconcilerUser   = "system:serviceaccount:gpuadmit-system:gpuadmit" // the reconciler before the split
	claimControlUser = "system:serviceaccount:kube-system:resource-claim-controller"
	draAgentUser     = "system:serviceaccount:gpuadmit-agent:gpuadmit-agent-dra"
	nodeNameExtra    = "authentication.kubernetes.io/node-name"
	useContainers    = "ask for GPU memory in the pod's container resources; gpuadmit writes the claim"
)

// clientAs is a client impersonating user, with groups and extra.
func clientAs(user string, groups []string, extra map[string][]string) (client.Client, error) {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups, Extra: extra}
	return client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
}

// reconciler is gpuadmit's reconciler by name. Its RBAC for claim templates
// comes with the reconciler, so here it is also in system:masters: the
// policy looks only at the name.
var reconciler = sync.OnceValues(func() (client.Client, error) {
	return clientAs(reconcilerUser, []string{"system:masters"}, nil)
})

// draAgentOn is the DRA agent's ServiceAccount with a token bound to a pod on node.
func draAgentOn(t *testing.T, node string) client.Client {
	t.Helper()
	c, err := clientAs(draAgentUser, []string{"system:serviceaccounts", "system:serviceaccounts:gpuadmit-agent"}, map[string][]string{nodeNameExtra: {node}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// installDRAPolicies applies deploy/dra's policies and the DRA agent's RBAC,
// kept like the DeviceClasses for every later test, and waits until the API
// server enforces both policies (it loads them asynchronously).
func installDRAPolicies(t *testing.T, ctx context.Context) {
	t.Helper()
	for _, f := range []string{"rbac.yaml", "own-node-policy.yaml", "claims-policy.yaml", "implicit-names-policy.yaml"} {
		if err := env.Apply(ctx, filepath.Join(root, "deploy/dra", f)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the claims policy denies", 30*time.Second, func() (bool, string) {
		err := env.Client.Create(ctx, template("default", "vap-probe", exactly(dra.ClassShare)), client.DryRunAll)
		return apierrors.IsForbidden(err), "dry-run create: " + errString(err)
	})
	agent := draAgentOn(t, "vap-probe-n1")
	waitFor(t, "the slices policy denies", 30*time.Second, func() (bool, string) {
		err := agent.Create(ctx, slice("vap-probe", "vap-probe-n2", dra.DriverName), client.DryRunAll)
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "spec.nodeName"), "dry-run create: " + errString(err)
	})
}

// waitAdmitted waits until the webhook admits p (a dry run): it rebuilds its
// inventory in the background, a moment after a node's change reaches its
// informer, so a pool a test has just made is not there at once.
func waitAdmitted(t *testing.T, ctx context.Context, what string, p *corev1.Pod) {
	t.Helper()
	waitFor(t, what, 30*time.Second, func() (bool, string) {
		err := env.Client.Create(ctx, p.DeepCopy(), client.DryRunAll)
		return err == nil, errString(err)
	})
}

func errString(err error) string {
	if err == nil {
		return "allowed"
	}
	return err.Error()
}

func exactly(class string) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class}}
}

func firstAvailable(classes ...string) resourceapi.DeviceRequest {
	r := resourceapi.DeviceRequest{Name: "gpu"}
	for i, c := range classes {
		r.FirstAvailable = append(r.FirstAvailable, resourceapi.DeviceSubRequest{Name: string(rune('a' + i)), DeviceClassName: c})
	}
	return r
}

func template(ns, name string, req resourceapi.DeviceRequest) *resourceapi.ResourceClaimTemplate {
	t := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	t.Spec.Spec.Devices.Requests = []resourceapi.DeviceRequest{req}
	return t
}

func newClaim(ns, name string, req resourceapi.DeviceRequest) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	c.Spec.Devices.Requests = []resourceapi.DeviceRequest{req}
	return c
}

func slice(name, node, driver string) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}}
	s.Spec.Driver = driver
	s.Spec.NodeName = ptr.To(node)
	s.Spec.Pool = resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}
	return s
}

func TestDRAClaimsOfGpuadmitClassesComeOnlyFromGpuadmit(t *testing.T) {
	ctx := context.Background()
	ns := draNamespace(t, ctx, "dra-claims") // installs the DeviceClasses and policies
	other := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "other.example.com"}}
	if err := env.Client.Create(ctx, other); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), other) })
	rec, err := reconciler()
	if err != nil {
		t.Fatal(err)
	}
	controller, err := clientAs(claimControlUser, []string{"system:masters"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	scheduler, err := clientAs("system:kube-scheduler", []string{"system:masters"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The controller's account, which writes the templates since the split
	// (reconcilerUser, which did before, is trusted for one more release);
	// its own policy wants gpuadmit's label on them.
	ctl, err := clientAs(controllerAccount, []string{"system:masters"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctlShare := template(ns, "ctl-share", exactly(dra.ClassShare))
	ctlShare.Labels = map[string]string{claim.ManagedBy: "gpuadmit"}
	tests := map[string]struct {
		as     client.Client
		object client.Object
		denied bool
	}{
		"an admin's share template":             {as: env.Client, object: template(ns, "admin-share", exactly(dra.ClassShare)), denied: true},
		"an admin's share claim":                {as: env.Client, object: newClaim(ns, "admin-share", exactly(dra.ClassShare)), denied: true},
		"an admin's MIG claim":                  {as: env.Client, object: newClaim(ns, "admin-mig", exactly(dra.MIGClass("3g.20gb"))), denied: true},
		"a gpuadmit class as the second choice": {as: env.Client, object: newClaim(ns, "admin-first", firstAvailable("other.example.com", dra.ClassGPU)), denied: true},
		"a template with a gpuadmit choice":     {as: env.Client, object: template(ns, "admin-first", firstAvailable(dra.ClassShare)), denied: true},
		"the scheduler's plain claim":           {as: scheduler, object: newClaim(ns, "sched-plain", exactly(dra.ClassGPU)), denied: true},
		"an admin's claim of another driver":    {as: env.Client, object: newClaim(ns, "admin-other", exactly("other.example.com"))},
		"an admin's template of another driver": {as: env.Client, object: template(ns, "admin-other", firstAvailable("other.example.com"))},
		"the reconciler's share template":       {as: rec, object: template(ns, "rec-share", exactly(dra.ClassShare))},
		"the controller's share template":       {as: ctl, object: ctlShare},
		"the resource-claim controller's claim": {as: controller, object: newClaim(ns, "ctrl-share", exactly(dra.ClassShare))},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.as.Create(ctx, tc.object)
			switch {
			case tc.denied && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), useContainers)):
				t.Errorf("got %v, want Forbidden saying %q", err, useContainers)
			case !tc.denied && err != nil:
				t.Errorf("got %v, want it allowed", err)
			}
		})
	}
	// A metadata-only update of a claim gpuadmit wrote passes (finalizers, labels).
	c := &resourceapi.ResourceClaim{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "ctrl-share"}, c); err != nil {
		t.Fatal(err)
	}
	c.Labels = map[string]string{"team": "a"}
	if err := env.Client.Update(ctx, c); err != nil {
		t.Errorf("an admin's label on a gpuadmit claim: %v, want it allowed", err)
	}
}

func TestDRAAgentWritesOnlyItsOwnNodesSlices(t *testing.T) {
	ctx := context.Background()
	draNamespace(t, ctx, "dra-slices")
	n1, n2 := "dra-vap-n1", "dra-vap-n2"
	agent := draAgentOn(t, n1)
	t.Cleanup(func() {
		for _, name := range []string{"own", "foreign", "other-driver", "admins"} {
			_ = env.Client.Delete(context.Background(), &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "dra-vap-" + name}})
		}
	})
	denied := func(what, want string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want Forbidden saying %q", what, err, want)
		}
	}
	own := slice("dra-vap-own", n1, dra.DriverName)
	if err := agent.Create(ctx, own); err != nil {
		t.Fatalf("its own node's slice: %v", err)
	}
	own.Spec.Devices = []resourceapi.Device{{Name: "gpu-0"}}
	if err := agent.Update(ctx, own); err != nil {
		t.Errorf("updating its own node's slice: %v", err)
	}
	denied("another node's slice", "spec.nodeName is the node it runs on", agent.Create(ctx, slice("dra-vap-foreign", n2, dra.DriverName)))
	denied("another driver's slice", "driver gpu.gpuadmit.io", agent.Create(ctx, slice("dra-vap-other-driver", n1, "other.example.com")))
	admins := slice("dra-vap-admins", n2, dra.DriverName)
	if err := env.Client.Create(ctx, admins); err != nil {
		t.Fatalf("an admin's slice for %s: %v", n2, err)
	}
	denied("deleting another node's slice", "spec.nodeName is the node it runs on", agent.Delete(ctx, admins))
	if err := agent.Delete(ctx, own); err != nil {
		t.Errorf("deleting its own node's slice: %v", err)
	}
}

func TestDRAAgentChangesOnlyItsOwnNode(t *testing.T) {
	ctx := context.Background()
	draNamespace(t, ctx, "dra-own-node")
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "dra-vap-node"}}
	if err := env.AddNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node) })
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"gpuadmit.io/vap-e2e":"x"}}}`))
	if err := draAgentOn(t, node.Name).Patch(ctx, node.DeepCopy(), patch); err != nil {
		t.Errorf("the agent on %s patching its Node: %v", node.Name, err)
	}
	for what, patch := range map[string]func(client.Client) error{
		"nodes":        func(c client.Client) error { return c.Patch(ctx, node.DeepCopy(), patch) },
		"nodes/status": func(c client.Client) error { return c.Status().Patch(ctx, node.DeepCopy(), patch) },
	} {
		err := patch(draAgentOn(t, "dra-vap-elsewhere"))
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "only the Node it runs on") {
			t.Errorf("the agent on another node patching %s: got %v, want Forbidden", what, err)
		}
	}
}
