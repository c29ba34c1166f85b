package deploy_test

import (
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/deploy"
)

// checkRoles: the webhook serves only (--role=webhook, no leader election);
// the reconcilers run in their own Deployment, gpuadmit-controller, as their
// own ServiceAccount, leader-elected, loading the same policies as the
// webhook and mounting neither the serving certificate nor the record key.
func checkRoles(t *testing.T, objs objects, policiesArg string) {
	t.Helper()
	wh := container(t, deployment(t, objs).Containers, "webhook")
	if !slices.Contains(wh.Args, "--role=webhook") || slices.Contains(wh.Args, "--leader-elect") {
		t.Errorf("webhook args %q: want --role=webhook and no --leader-elect", wh.Args)
	}
	d := get[*appsv1.Deployment](t, objs, "Deployment", namespace, "gpuadmit-controller")
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 1 || *d.Spec.Replicas > 2 {
		t.Errorf("controller replicas = %s, want 1 or 2 (one leads)", show(d.Spec.Replicas))
	}
	pod := d.Spec.Template.Spec
	if pod.ServiceAccountName != controllerAccount {
		t.Errorf("controller serviceAccountName = %q, want %q", pod.ServiceAccountName, controllerAccount)
	}
	if sel := d.Spec.Selector.MatchLabels; sel["app.kubernetes.io/component"] != "controller" || selects(t, sel) {
		t.Errorf("controller selector %v: want component controller, not selecting the webhook pods", sel)
	}
	checkPodSecurity(t, pod)
	checkVolumeMounts(t, pod)
	c := container(t, pod.Containers, "controller")
	if c.Image != image || !slices.Equal(c.Command, []string{"/gpuadmit-webhook"}) {
		t.Errorf("controller runs %v from %s, want /gpuadmit-webhook from %s", c.Command, c.Image, image)
	}
	for _, want := range []string{"--role=controller", "--leader-elect", "--health-probe-bind-address=:8081"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("controller args %q lack %s", c.Args, want)
		}
	}
	if got := policiesArgs(c.Args); !slices.Equal(got, policiesArgs(wh.Args)) {
		t.Errorf("controller --policies %q, webhook %q: both must load the same set", got, policiesArgs(wh.Args))
	}
	for _, m := range c.VolumeMounts {
		if m.MountPath == "/tls" || m.MountPath == "/record-key" {
			t.Errorf("controller mounts %s: it serves no reviews", m.MountPath)
		}
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
		t.Errorf("controller readinessProbe = %+v, want GET /readyz", p)
	}
	checkPolicySource(t, pod, c, policiesArg)
}

// checkPolicySource: the controller reads the policies where the webhook does.
func checkPolicySource(t *testing.T, pod corev1.PodSpec, c corev1.Container, policiesArg string) {
	t.Helper()
	switch {
	case strings.HasPrefix(policiesArg, "--policies=/git/"):
		gs := container(t, pod.InitContainers, "git-sync")
		if mount(t, pod, gs, "/git").Name != mount(t, pod, c, "/git").Name {
			t.Errorf("the controller's git-sync and controller do not share /git")
		}
	case policiesArg == "--policies=/policies":
		if v := mount(t, pod, c, "/policies"); v.ConfigMap == nil || v.ConfigMap.Name != "gpuadmit-policies" {
			t.Errorf("controller /policies is %+v, want ConfigMap gpuadmit-policies", v)
		}
	}
}

func policiesArgs(args []string) []string {
	var out []string
	for _, a := range args {
		if strings.HasPrefix(a, "--policies") {
			out = append(out, a)
		}
	}
	return out
}

// checkControllerPolicy: the ValidatingAdmissionPolicy gpuadmit-controller,
// bound with Deny, keeps the controller's account to the ResourceQuota named
// gpuadmit and the templates gpuadmit labels; other users are not matched.
// Its CEL is evaluated here with plain cel-go; test/e2e's TestGateLeastPrivilege
// meets the API server's.
func checkControllerPolicy(t *testing.T, objs objects) {
	t.Helper()
	vap := denyingPolicy(t, objs, "gpuadmit-controller")
	e := newVAPEval(t, vap)
	type obj = map[string]any
	owned := obj{"app.kubernetes.io/managed-by": "gpuadmit"}
	meta := func(name string, labels obj) obj {
		m := obj{"name": name, "namespace": "team-a"}
		if labels != nil {
			m["labels"] = labels
		}
		return obj{"metadata": m}
	}
	const ctl = "system:serviceaccount:" + namespace + ":" + controllerAccount
	tests := map[string]struct {
		user, resource, op string
		object, oldObject  obj
		allowed            bool
	}{
		"its quota created":                       {user: ctl, resource: "resourcequotas", op: "CREATE", object: meta("gpuadmit", owned), allowed: true},
		"its quota updated":                       {user: ctl, resource: "resourcequotas", op: "UPDATE", object: meta("gpuadmit", owned), oldObject: meta("gpuadmit", owned), allowed: true},
		"its quota deleted":                       {user: ctl, resource: "resourcequotas", op: "DELETE", oldObject: meta("gpuadmit", owned), allowed: true},
		"another quota created":                   {user: ctl, resource: "resourcequotas", op: "CREATE", object: meta("team-limits", owned)},
		"another quota deleted":                   {user: ctl, resource: "resourcequotas", op: "DELETE", oldObject: meta("team-limits", nil)},
		"an admin's quota named gpuadmit updated": {user: ctl, resource: "resourcequotas", op: "UPDATE", object: meta("gpuadmit", owned), oldObject: meta("gpuadmit", nil)},
		"an admin's quota named gpuadmit deleted": {user: ctl, resource: "resourcequotas", op: "DELETE", oldObject: meta("gpuadmit", nil)},
		"its quota unlabelled":                    {user: ctl, resource: "resourcequotas", op: "UPDATE", object: meta("gpuadmit", nil), oldObject: meta("gpuadmit", owned)},
		"its template created":                    {user: ctl, resource: "resourceclaimtemplates", op: "CREATE", object: meta("gpuadmit-share-1", owned), allowed: true},
		"its template deleted":                    {user: ctl, resource: "resourceclaimtemplates", op: "DELETE", oldObject: meta("gpuadmit-share-1", owned), allowed: true},
		"an unlabelled template created":          {user: ctl, resource: "resourceclaimtemplates", op: "CREATE", object: meta("mine", nil)},
		"a template labelled otherwise":           {user: ctl, resource: "resourceclaimtemplates", op: "CREATE", object: meta("mine", obj{"app.kubernetes.io/managed-by": "helm"})},
		"someone else's template deleted":         {user: ctl, resource: "resourceclaimtemplates", op: "DELETE", oldObject: meta("theirs", nil)},
		"its record written":                      {user: ctl, resource: "configmaps", op: "UPDATE", object: meta("gpuadmit-scheduler-pools", owned), oldObject: meta("gpuadmit-scheduler-pools", owned), allowed: true},
		"another ConfigMap written":               {user: ctl, resource: "configmaps", op: "CREATE", object: meta("kube-root-ca.crt", owned)},
		"a waiting pod of a controller deleted":   {user: ctl, resource: "pods", op: "DELETE", oldObject: pendingPod("gpuadmit-scheduler", "", true), allowed: true},
		"a bound pod deleted":                     {user: ctl, resource: "pods", op: "DELETE", oldObject: pendingPod("gpuadmit-scheduler", "node-1", true)},
		"a bare waiting pod deleted":              {user: ctl, resource: "pods", op: "DELETE", oldObject: pendingPod("gpuadmit-scheduler", "", false)},
		"a stock scheduler's pod deleted":         {user: ctl, resource: "pods", op: "DELETE", oldObject: pendingPod("default-scheduler", "", true)},
		"an admin's quota is not matched":         {user: "kubernetes-admin", resource: "resourcequotas", op: "CREATE", object: meta("team-limits", nil), allowed: true},
		"the webhook's account is not matched":    {user: "system:serviceaccount:" + namespace + ":" + serviceAccount, resource: "resourcequotas", op: "CREATE", object: meta("x", nil), allowed: true},
	}
	for name, tc := range tests {
		req := obj{"operation": tc.op, "namespace": "team-a", "resource": obj{"resource": tc.resource}, "userInfo": obj{"username": tc.user}}
		var object, oldObject any
		if tc.object != nil {
			object = tc.object
		}
		if tc.oldObject != nil {
			oldObject = tc.oldObject
		}
		msg := e.Admit(req, object, oldObject)
		if (msg == "") != tc.allowed {
			t.Errorf("%s: refusal %q, want allowed %v", name, msg, tc.allowed)
		}
		if !tc.allowed && !strings.Contains(msg, "gpuadmit-controller writes only") {
			t.Errorf("%s: message %q does not say what the controller may write", name, msg)
		}
	}
}

// pendingPod is a pod gpuadmit placed, for scheduler, on node ("" for
// none), with a ReplicaSet as its controller where controlled.
func pendingPod(scheduler, node string, controlled bool) map[string]any {
	type obj = map[string]any
	meta := obj{"name": "p", "namespace": "team-a", "labels": obj{"gpuadmit.io/managed": "true"}}
	if controlled {
		meta["ownerReferences"] = []any{obj{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": true}}
	}
	spec := obj{"schedulerName": scheduler}
	if node != "" {
		spec["nodeName"] = node
	}
	return obj{"metadata": meta, "spec": spec}
}

// newVAPEval is deploy's VAPEvaluator of vap, failing the test where the
// policy's CEL does not compile.
func newVAPEval(t *testing.T, vap *admissionregistrationv1.ValidatingAdmissionPolicy) *deploy.VAPEvaluator {
	t.Helper()
	ev, err := deploy.NewVAPEvaluator(vap)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}
