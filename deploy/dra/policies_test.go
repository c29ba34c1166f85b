package dra_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/gpuadmit/gpuadmit/deploy"
)

// The identities the policies name.
const (
	reconciler        = "system:serviceaccount:gpuadmit-system:gpuadmit-controller"
	oldReconciler     = "system:serviceaccount:gpuadmit-system:gpuadmit" // trusted for one release after the split
	webhook           = "system:serviceaccount:gpuadmit-system:gpuadmit-webhook"
	claimCtrl         = "system:serviceaccount:kube-system:resource-claim-controller"
	kcm               = "system:kube-controller-manager"
	scheduler         = "system:kube-scheduler"
	gpuadmitScheduler = "system:serviceaccount:gpuadmit-system:gpuadmit-scheduler"
	draAgent          = "system:serviceaccount:gpuadmit-agent:gpuadmit-agent-dra"
	admin             = "kubernetes-admin"
)

// build renders the kustomization with kustomize (hack/tools.sh) and decodes
// every object strictly; without kustomize the test is skipped, unless
// GPUADMIT_REQUIRE_TOOLS=1 (CI).
func build(t *testing.T) map[string][]runtime.Object {
	t.Helper()
	tools, missing := deploy.FindTools(filepath.Join("..", "..", ".bin", "tools"))
	if slices.Contains(missing, "kustomize") {
		if _, err := exec.LookPath("kustomize"); err != nil {
			if os.Getenv("GPUADMIT_REQUIRE_TOOLS") == "1" {
				t.Fatal("kustomize not found: run hack/tools.sh")
			}
			t.Skip("kustomize not found: run hack/tools.sh")
		}
		tools.Kustomize = "kustomize"
	}
	stream, err := tools.Build(".")
	if err != nil {
		t.Fatal(err)
	}
	return decodeStrict(t, stream)
}

// decodeStrict decodes every document strictly: a misspelt field fails here.
func decodeStrict(t *testing.T, stream []byte) map[string][]runtime.Object {
	t.Helper()
	out, err := deploy.DecodeByKind(stream, clientgoscheme.AddToScheme)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// policy returns the rendered policy name.
func policy(t *testing.T, objs map[string][]runtime.Object, name string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	for _, o := range objs["ValidatingAdmissionPolicy"] {
		if p := o.(*admissionregistrationv1.ValidatingAdmissionPolicy); p.Name == name {
			return p
		}
	}
	t.Fatalf("kustomize build deploy/dra renders no ValidatingAdmissionPolicy %s", name)
	return nil
}

func TestPoliciesAreBoundToDeny(t *testing.T) {
	objs := build(t)
	var names []string
	for _, o := range objs["ValidatingAdmissionPolicy"] {
		p := o.(*admissionregistrationv1.ValidatingAdmissionPolicy)
		names = append(names, p.Name)
		if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionregistrationv1.Fail {
			t.Errorf("policy %s: failurePolicy %v, want Fail", p.Name, p.Spec.FailurePolicy)
		}
	}
	slices.Sort(names)
	want := []string{"gpuadmit-agent-dra-own-node", "gpuadmit-agent-dra-own-slices", "gpuadmit-dra-claims", "gpuadmit-dra-implicit-names"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Fatalf("policies (-want +got):\n%s", diff)
	}
	var bound []string
	for _, o := range objs["ValidatingAdmissionPolicyBinding"] {
		b := o.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
		if !cmp.Equal(b.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) ||
			b.Spec.ParamRef != nil || b.Spec.MatchResources != nil {
			t.Errorf("binding %s: %+v, want Deny everywhere, without params", b.Name, b.Spec)
		}
		bound = append(bound, b.Spec.PolicyName)
	}
	slices.Sort(bound)
	if diff := cmp.Diff(want, bound); diff != "" {
		t.Errorf("bound policies (-want +got):\n%s", diff)
	}
}

// evaluator is deploy's VAPEvaluator with the policy at hand, failing the
// test where the policy's CEL does not compile.
type evaluator struct {
	vap *admissionregistrationv1.ValidatingAdmissionPolicy
	*deploy.VAPEvaluator
}

func newEvaluator(t *testing.T, vap *admissionregistrationv1.ValidatingAdmissionPolicy) evaluator {
	t.Helper()
	ev, err := deploy.NewVAPEvaluator(vap)
	if err != nil {
		t.Fatal(err)
	}
	return evaluator{vap: vap, VAPEvaluator: ev}
}

func (e evaluator) admit(req, object, oldObject map[string]any) string {
	return e.Admit(req, object, oldObject)
}

// exactly and firstAvailable are device requests in resource.k8s.io/v1.
func exactly(name, class string) map[string]any {
	return map[string]any{"name": name, "exactly": map[string]any{"deviceClassName": class, "allocationMode": "ExactCount", "count": 1}}
}

func firstAvailable(name string, classes ...string) map[string]any {
	var subs []any
	for i, c := range classes {
		subs = append(subs, map[string]any{"name": "s" + string(rune('0'+i)), "deviceClassName": c})
	}
	return map[string]any{"name": name, "firstAvailable": subs}
}

func claimSpec(requests ...map[string]any) map[string]any {
	if requests == nil {
		return map[string]any{}
	}
	var rs []any
	for _, r := range requests {
		rs = append(rs, r)
	}
	return map[string]any{"devices": map[string]any{"requests": rs}}
}

func TestClaimsPolicy(t *testing.T) {
	e := newEvaluator(t, policy(t, build(t), "gpuadmit-dra-claims"))
	const denied = "ask for GPU memory in the pod's container resources; gpuadmit writes the claim"
	type obj = map[string]any
	claim := func(spec obj) obj { return obj{"metadata": obj{"name": "c"}, "spec": spec} }
	template := func(spec obj) obj { return obj{"metadata": obj{"name": "t"}, "spec": obj{"spec": spec}} }
	extended := func(spec obj) obj {
		return obj{"metadata": obj{"name": "c", "annotations": obj{"resource.kubernetes.io/extended-resource-claim": "true"}}, "spec": spec}
	}
	share := claimSpec(exactly("gpu", "gpu-share.gpuadmit.io"))
	tests := map[string]struct {
		user, resource, op string
		object, oldObject  obj
		want               string // a part of the message; "" is allowed
	}{
		"an admin's share claim":                       {user: admin, object: claim(share), want: denied},
		"an admin's share template":                    {user: admin, resource: "resourceclaimtemplates", object: template(share), want: denied},
		"a MIG class in a template":                    {user: admin, resource: "resourceclaimtemplates", object: template(claimSpec(exactly("mig", "mig-1g.10gb.gpuadmit.io"))), want: "device requests mig name"},
		"a gpuadmit class as the second choice":        {user: admin, object: claim(claimSpec(firstAvailable("any", "other.example.com", "gpu.gpuadmit.io"))), want: "device requests any name"},
		"every offending request is named":             {user: admin, object: claim(claimSpec(exactly("a", "gpu.gpuadmit.io"), exactly("b", "x.example.com"), firstAvailable("c", "gpu.gpuadmit.io"))), want: "device requests a, c name"},
		"another driver's class":                       {user: admin, object: claim(claimSpec(exactly("gpu", "other.example.com"), firstAvailable("f", "a.example.com")))},
		"a class merely containing gpuadmit.io":        {user: admin, object: claim(claimSpec(exactly("gpu", "gpuadmit.io.example.com")))},
		"a claim without devices":                      {user: admin, object: claim(claimSpec())},
		"the reconciler's template":                    {user: reconciler, resource: "resourceclaimtemplates", object: template(share)},
		"the reconciler's template, as it ran before":  {user: oldReconciler, resource: "resourceclaimtemplates", object: template(share)},
		"a look-alike account":                         {user: webhook, resource: "resourceclaimtemplates", object: template(share), want: denied},
		"the resource-claim controller's claim":        {user: claimCtrl, object: claim(share)},
		"the controller-manager's claim":               {user: kcm, object: claim(share)},
		"the scheduler's extended-resource claim":      {user: scheduler, object: extended(share)},
		"the scheduler's plain claim":                  {user: scheduler, object: claim(share), want: denied},
		"gpuadmit-scheduler's extended-resource claim": {user: gpuadmitScheduler, object: extended(share)},
		"gpuadmit-scheduler's plain claim":             {user: gpuadmitScheduler, object: claim(share), want: denied},
		"an admin's claim posing as extended":          {user: admin, object: extended(share), want: denied},
		"the scheduler's template":                     {user: scheduler, resource: "resourceclaimtemplates", object: template(share), want: denied},
		"an update that leaves the spec (finalizer)":   {user: admin, op: "UPDATE", object: claim(share), oldObject: claim(share)},
		"an update that names a gpuadmit class":        {user: admin, op: "UPDATE", object: claim(share), oldObject: claim(claimSpec()), want: denied},
	}
	for name, tc := range tests {
		if tc.resource == "" {
			tc.resource = "resourceclaims"
		}
		if tc.op == "" {
			tc.op = "CREATE"
		}
		req := map[string]any{
			"operation": tc.op, "resource": map[string]any{"group": "resource.k8s.io", "version": "v1", "resource": tc.resource},
			"userInfo": map[string]any{"username": tc.user},
		}
		got := e.admit(req, tc.object, tc.oldObject)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: got %q, want %q", name, got, tc.want)
		}
	}
}

func TestOwnSlicesPolicy(t *testing.T) {
	e := newEvaluator(t, policy(t, build(t), "gpuadmit-agent-dra-own-slices"))
	type obj = map[string]any
	slice := func(node, driver string) obj {
		spec := obj{"driver": driver, "pool": obj{"name": node}}
		if node != "" {
			spec["nodeName"] = node
		}
		return obj{"metadata": obj{"name": "s"}, "spec": spec}
	}
	const driver = "driver gpu.gpuadmit.io"
	tests := map[string]struct {
		user, op, on      string
		object, oldObject obj
		want              string
	}{
		"its node's slice":                {user: draAgent, on: "n1", object: slice("n1", "gpu.gpuadmit.io")},
		"another node's slice":            {user: draAgent, on: "n1", object: slice("n2", "gpu.gpuadmit.io"), want: "spec.nodeName"},
		"another driver's slice":          {user: draAgent, on: "n1", object: slice("n1", "other.example.com"), want: driver},
		"a slice for all nodes":           {user: draAgent, on: "n1", object: slice("", "gpu.gpuadmit.io"), want: "spec.nodeName"},
		"a token that names no node":      {user: draAgent, object: slice("n1", "gpu.gpuadmit.io"), want: "spec.nodeName"},
		"an update of its node's slice":   {user: draAgent, on: "n1", op: "UPDATE", object: slice("n1", "gpu.gpuadmit.io"), oldObject: slice("n1", "gpu.gpuadmit.io")},
		"deleting its node's slice":       {user: draAgent, on: "n1", op: "DELETE", oldObject: slice("n1", "gpu.gpuadmit.io")},
		"deleting another node's slice":   {user: draAgent, on: "n1", op: "DELETE", oldObject: slice("n2", "gpu.gpuadmit.io"), want: "spec.nodeName"},
		"deleting another driver's one":   {user: draAgent, on: "n1", op: "DELETE", oldObject: slice("n1", "other.example.com"), want: driver},
		"anyone else is left to RBAC":     {user: admin, object: slice("n2", "other.example.com")},
		"the device-plugin agent as well": {user: "system:serviceaccount:gpuadmit-agent:gpuadmit-agent", on: "n1", object: slice("n2", "gpu.gpuadmit.io")},
	}
	for name, tc := range tests {
		if tc.op == "" {
			tc.op = "CREATE"
		}
		user := obj{"username": tc.user}
		if tc.on != "" {
			user["extra"] = obj{"authentication.kubernetes.io/node-name": []any{tc.on}}
		}
		req := obj{"operation": tc.op, "userInfo": user}
		got := e.admit(req, tc.object, tc.oldObject)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: got %q, want %q", name, got, tc.want)
		}
	}
}

func TestOwnNodePolicy(t *testing.T) {
	e := newEvaluator(t, policy(t, build(t), "gpuadmit-agent-dra-own-node"))
	type obj = map[string]any
	if rules := e.vap.Spec.MatchConstraints.ResourceRules; len(rules) != 1 || !cmp.Equal(rules[0].Resources, []string{"nodes", "nodes/status"}) {
		t.Errorf("rules %+v: want nodes and nodes/status", rules)
	}
	tests := map[string]struct {
		user, on, node string
		want           string
	}{
		"its own node":       {user: draAgent, on: "gpu-1", node: "gpu-1"},
		"another node":       {user: draAgent, on: "gpu-1", node: "gpu-2", want: "only the Node it runs on"},
		"no node named":      {user: draAgent, node: "gpu-1", want: "only the Node it runs on"},
		"the node's kubelet": {user: "system:node:gpu-2", on: "gpu-1", node: "gpu-2"},
	}
	for name, tc := range tests {
		user := obj{"username": tc.user}
		if tc.on != "" {
			user["extra"] = obj{"authentication.kubernetes.io/node-name": []any{tc.on}}
		}
		got := e.admit(obj{"operation": "UPDATE", "userInfo": user}, obj{"metadata": obj{"name": tc.node}}, nil)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: got %q, want %q", name, got, tc.want)
		}
	}
}

// TestImplicitNamesPolicy: a pod created with one of gpuadmit's classes by
// its implicit extended-resource name (one gpuadmit's webhook did not
// decide) is refused, naming the container and the name; other drivers'
// classes, gpuadmit's own resources and updates pass.
func TestImplicitNamesPolicy(t *testing.T) {
	e := newEvaluator(t, policy(t, build(t), "gpuadmit-dra-implicit-names"))
	if ops := e.vap.Spec.MatchConstraints.ResourceRules[0].Operations; !slices.Equal(ops, []admissionregistrationv1.OperationType{admissionregistrationv1.Create}) {
		t.Errorf("operations %v, want CREATE only (an UPDATE refused would keep an old pod's finalizers)", ops)
	}
	pod := func(init bool, kind string, names ...string) map[string]any {
		list := map[string]any{}
		for _, n := range names {
			list[n] = "1"
		}
		c := map[string]any{"name": "main", "resources": map[string]any{kind: list}}
		spec := map[string]any{"containers": []any{map[string]any{"name": "side"}, c}}
		if init {
			c["name"] = "setup"
			spec = map[string]any{"containers": []any{map[string]any{"name": "side"}}, "initContainers": []any{c}}
		}
		return map[string]any{"spec": spec}
	}
	create := map[string]any{"operation": "CREATE"}
	tests := map[string]struct {
		pod  map[string]any
		want string
	}{
		"the whole-GPU class by its implicit name": {pod: pod(false, "limits", "cpu", "deviceclass.resource.kubernetes.io/gpu.gpuadmit.io"),
			want: "container main asks for deviceclass.resource.kubernetes.io/gpu.gpuadmit.io, one of gpuadmit's DeviceClasses"},
		"a MIG class as a request of an init container": {pod: pod(true, "requests", "deviceclass.resource.kubernetes.io/mig-1g.10gb.gpuadmit.io"),
			want: "container setup asks for deviceclass.resource.kubernetes.io/mig-1g.10gb.gpuadmit.io"},
		"another driver's class":    {pod: pod(false, "limits", "deviceclass.resource.kubernetes.io/fpga.example.com")},
		"gpuadmit's own resources":  {pod: pod(false, "limits", "nvidia.com/gpu", "gpuadmit.io/gpu-memory-mib")},
		"a pod without any request": {pod: map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "c"}}}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := e.admit(create, tc.pod, nil)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("admit: %q, want %q", got, tc.want)
			}
		})
	}
}
