// Package agent_test checks the node agent's manifests: rendered by
// kustomize when hack/tools.sh installed it (required in CI), else read file
// by file as the kustomization lists them, and decoded strictly. The MPS
// component (mps/, built through deploy/overlays/agent-mps) needs kustomize.
package agent_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/gpuadmit/gpuadmit/deploy"
	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

const (
	namespace = "gpuadmit-agent"
	account   = "gpuadmit-agent"
)

// mpsOverlay is the agent with the MPS component.
var mpsOverlay = filepath.Join("..", "overlays", "agent-mps")

// kustomize finds kustomize in $GPUADMIT_TOOLS or .bin/tools, as hack/tools.sh installs it.
func kustomize() (deploy.Tools, bool) {
	dir := os.Getenv("GPUADMIT_TOOLS")
	if dir == "" {
		dir = filepath.Join("..", "..", ".bin", "tools")
	}
	tools, missing := deploy.FindTools(dir)
	return tools, !slices.Contains(missing, "kustomize")
}

// render returns the kustomization's objects by kind.
func render(t *testing.T) map[string][]runtime.Object {
	t.Helper()
	tools, ok := kustomize()
	var stream []byte
	switch {
	case ok:
		out, err := tools.Build(".")
		if err != nil {
			t.Fatal(err)
		}
		stream = out
	case os.Getenv("GPUADMIT_REQUIRE_TOOLS") == "1":
		t.Fatal("kustomize not found: run hack/tools.sh")
	default:
		stream = concatenate(t)
	}
	return decode(t, stream)
}

// renderMPS returns the MPS overlay's objects by kind; it needs kustomize.
func renderMPS(t *testing.T) map[string][]runtime.Object {
	t.Helper()
	tools, ok := kustomize()
	if !ok {
		if os.Getenv("GPUADMIT_REQUIRE_TOOLS") == "1" {
			t.Fatal("kustomize not found: run hack/tools.sh")
		}
		t.Skip("kustomize not found: run hack/tools.sh")
	}
	out, err := tools.Build(mpsOverlay)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, out)
}

// concatenate joins the files kustomization.yaml lists, as kustomize would.
func concatenate(t *testing.T) []byte {
	var k struct{ Resources []string }
	data, err := os.ReadFile("kustomization.yaml")
	if err == nil {
		err = yaml.Unmarshal(data, &k)
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, f := range k.Resources {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(append(out, "\n---\n"...), data...)
	}
	return out
}

// decode decodes every document strictly: a misspelt field fails here.
func decode(t *testing.T, stream []byte) map[string][]runtime.Object {
	t.Helper()
	out, err := deploy.DecodeByKind(stream, clientgoscheme.AddToScheme)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestManifestsHoldTogether(t *testing.T) {
	objs := render(t)
	var kinds []string
	for k, list := range objs {
		for range list {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds)
	want := []string{"ClusterRole", "ClusterRoleBinding", "DaemonSet", "DaemonSet", "Namespace", "ServiceAccount",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Fatalf("objects (-want +got):\n%s", diff)
	}
	ns := objs["Namespace"][0].(*corev1.Namespace)
	if ns.Name != namespace || ns.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Errorf("namespace %s labels %v: want %s, privileged (hostPath sockets)", ns.Name, ns.Labels, namespace)
	}
	sa := objs["ServiceAccount"][0].(*corev1.ServiceAccount)
	b := objs["ClusterRoleBinding"][0].(*rbacv1.ClusterRoleBinding)
	role := objs["ClusterRole"][0].(*rbacv1.ClusterRole)
	wantSubject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: sa.Namespace}}
	if sa.Namespace != namespace || b.RoleRef.Name != role.Name || !cmp.Equal(wantSubject, b.Subjects) {
		t.Errorf("binding %+v does not give ClusterRole %s to ServiceAccount %s/%s", b, role.Name, sa.Namespace, sa.Name)
	}
}

// TestAgentMayPatchOnlyNodes: least privilege, the whole list.
func TestAgentMayPatchOnlyNodes(t *testing.T) {
	role := render(t)["ClusterRole"][0].(*rbacv1.ClusterRole)
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}},
	}
	if diff := cmp.Diff(want, role.Rules); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
}

func TestDaemonSetRunsOnDevicePluginNodes(t *testing.T) {
	ds := render(t)["DaemonSet"][0].(*appsv1.DaemonSet)
	spec := ds.Spec.Template.Spec
	if spec.ServiceAccountName != account || ds.Namespace != namespace {
		t.Errorf("DaemonSet %s/%s runs as %q, want %s/%s", ds.Namespace, ds.Name, spec.ServiceAccountName, namespace, account)
	}
	if want := map[string]string{allocator.LabelNodeMode: allocator.NodeModeDevicePlugin}; !cmp.Equal(want, spec.NodeSelector) {
		t.Errorf("node selector %v, want %v: only nodes an operator put in device-plugin mode", spec.NodeSelector, want)
	}
	terms := spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	want := []corev1.NodeSelectorTerm{
		{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "nvidia.com/gpu.present", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}}},
		{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "nvidia.com/gpu.product", Operator: corev1.NodeSelectorOpExists}}},
	}
	if diff := cmp.Diff(want, terms); diff != "" {
		t.Errorf("node affinity (-want +got):\n%s", diff)
	}
	gpuTaint := corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	if !slices.ContainsFunc(spec.Tolerations, func(tl corev1.Toleration) bool { return tl.ToleratesTaint(klog.Background(), &gpuTaint, false) }) {
		t.Errorf("tolerations %v do not tolerate %v", spec.Tolerations, gpuTaint)
	}
	c := spec.Containers[0]
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	hostPaths := map[string]string{}
	for _, v := range spec.Volumes {
		if v.HostPath == nil {
			t.Errorf("volume %s: want a hostPath, got %+v", v.Name, v.VolumeSource)
			continue
		}
		hostPaths[v.HostPath.Path] = mounts[v.Name]
	}
	wantPaths := map[string]string{
		"/var/lib/kubelet/device-plugins": "/var/lib/kubelet/device-plugins", "/var/run/cdi": "/var/run/cdi", "/": "/driver-root",
	}
	if diff := cmp.Diff(wantPaths, hostPaths); diff != "" {
		t.Errorf("host paths by mount path: the kubelet's device-plugin directory, the CDI directory, the driver root, nothing else (-want +got):\n%s", diff)
	}
	for _, flag := range []string{"--cdi-dir=/var/run/cdi", "--driver-root=/", "--container-driver-root=/driver-root"} {
		if !slices.Contains(c.Args, flag) {
			t.Errorf("args %v lack %s", c.Args, flag)
		}
	}
	if i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/driver-root" }); i < 0 || !c.VolumeMounts[i].ReadOnly {
		t.Errorf("mounts %v: want the driver root read-only at /driver-root", c.VolumeMounts)
	}
	if i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "NODE_NAME" }); i < 0 ||
		c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("env %v: want NODE_NAME from spec.nodeName", c.Env)
	}
}

// TestDaemonSetFlagsExist: every flag the DaemonSet passes is one the agent
// defines (or controller-runtime's zap logger does).
func TestDaemonSetFlagsExist(t *testing.T) {
	checkFlags(t, render(t)["DaemonSet"][0].(*appsv1.DaemonSet))
}

func checkFlags(t *testing.T, ds *appsv1.DaemonSet) {
	t.Helper()
	// The command's flags are defined in its Go files (flags.go, main.go).
	files, err := filepath.Glob(filepath.Join("..", "..", "cmd", "agent", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("cmd/agent's sources: %v %v", files, err)
	}
	var main []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		main = append(main, b...)
	}
	for _, arg := range ds.Spec.Template.Spec.Containers[0].Args {
		name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		if !strings.HasPrefix(name, "zap-") && !bytes.Contains(main, []byte(`"`+name+`"`)) {
			t.Errorf("the DaemonSet passes --%s, which cmd/agent does not define", name)
		}
	}
}

// TestOwnNodePolicy evaluates the policy's CEL on the requests it must
// allow and refuse (with plain CEL: the API server's typed environment is
// met in the end-to-end tests).
func TestOwnNodePolicy(t *testing.T) {
	vap := render(t)["ValidatingAdmissionPolicy"][0].(*admissionregistrationv1.ValidatingAdmissionPolicy)
	env, err := cel.NewEnv(cel.Variable("request", cel.DynType), cel.Variable("object", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	eval := func(expr string, user map[string]any) bool {
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			t.Fatalf("compile %q: %v", expr, iss.Err())
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := prg.Eval(map[string]any{
			"request": map[string]any{"userInfo": user},
			"object":  map[string]any{"metadata": map[string]any{"name": "gpu-1"}},
		})
		return err == nil && out.Value() == true
	}
	agent := "system:serviceaccount:" + namespace + ":" + account
	onNode := func(node string) map[string]any {
		return map[string]any{"username": agent, "extra": map[string]any{"authentication.kubernetes.io/node-name": []any{node}}}
	}
	if !eval(vap.Spec.MatchConditions[0].Expression, onNode("gpu-1")) ||
		eval(vap.Spec.MatchConditions[0].Expression, map[string]any{"username": "system:node:gpu-1"}) {
		t.Error("the policy does not match the agent, and only the agent")
	}
	rule := vap.Spec.Validations[0].Expression
	tests := map[string]struct {
		user map[string]any
		want bool
	}{
		"the agent on the node":          {user: onNode("gpu-1"), want: true},
		"the agent on another node":      {user: onNode("gpu-2"), want: false},
		"a token that names no node":     {user: map[string]any{"username": agent}, want: false},
		"extras without the node's name": {user: map[string]any{"username": agent, "extra": map[string]any{}}, want: false},
	}
	for name, tc := range tests {
		if got := eval(rule, tc.user); got != tc.want {
			t.Errorf("%s: allowed %v, want %v", name, got, tc.want)
		}
	}
}

// TestPublishDaemonSet: nodes in neither mode (NVIDIA's device plugin serves
// their GPUs) get the agent in publish mode, which mounts nothing of the
// kubelet's and runs as no root: it only writes its Node.
func TestPublishDaemonSet(t *testing.T) {
	var ds *appsv1.DaemonSet
	for _, o := range render(t)["DaemonSet"] {
		if d := o.(*appsv1.DaemonSet); d.Name == "gpuadmit-agent-publish" {
			ds = d
		}
	}
	if ds == nil {
		t.Fatal("no gpuadmit-agent-publish DaemonSet")
	}
	spec := ds.Spec.Template.Spec
	if args := spec.Containers[0].Args; !slices.Contains(args, "--mode=publish") {
		t.Errorf("args %v, want --mode=publish", args)
	}
	if len(spec.Volumes) != 0 {
		t.Errorf("volumes %v, want none", spec.Volumes)
	}
	for i, term := range spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if !slices.ContainsFunc(term.MatchExpressions, func(r corev1.NodeSelectorRequirement) bool {
			return r.Key == "gpuadmit.io/node-mode" && r.Operator == corev1.NodeSelectorOpDoesNotExist
		}) {
			t.Errorf("node selector term %d does not keep the agent off nodes in a gpuadmit mode", i)
		}
	}
}
