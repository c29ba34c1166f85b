package deploy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/gpuadmit/gpuadmit/certs"
	"github.com/gpuadmit/gpuadmit/deploy"
)

// The names deploy/ and the webhook binary agree on.
const (
	namespace       = "gpuadmit-system"
	serviceName     = "gpuadmit-webhook"
	tlsSecretName   = "gpuadmit-webhook-tls"
	recordKeySecret = "gpuadmit-record-key"
	serviceAccount  = "gpuadmit"
	// controllerAccount runs the reconcilers, the only writer of the two.
	controllerAccount = "gpuadmit-controller"
	image             = "ghcr.io/gpuadmit/gpuadmit:v0.1.0"
)

// key names one rendered object.
type key struct{ Kind, Namespace, Name string }

func (k key) String() string { return k.Kind + " " + k.Namespace + "/" + k.Name }

// objects is one rendering, each object decoded into its Go type.
type objects map[key]runtime.Object

// tools are the renderers, from hack/tools.sh.
type tools struct{ deploy.Tools }

// findTools looks for kustomize and helm in $GPUADMIT_TOOLS or ../.bin/tools.
// Without them the test is skipped, unless GPUADMIT_REQUIRE_TOOLS=1 (CI).
func findTools(t *testing.T) tools {
	t.Helper()
	dir := os.Getenv("GPUADMIT_TOOLS")
	if dir == "" {
		dir = filepath.Join("..", ".bin", "tools")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	tl, missing := deploy.FindTools(dir)
	if len(missing) > 0 {
		msg := fmt.Sprintf("%s not found in %s: run hack/tools.sh", strings.Join(missing, " and "), dir)
		if os.Getenv("GPUADMIT_REQUIRE_TOOLS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return tools{tl}
}

// build renders a kustomization directory.
func (tl tools) build(t *testing.T, dir string) objects {
	t.Helper()
	out, err := tl.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, out)
}

// template renders the chart with --set/--set-file arguments. Helm's own
// directories point into a temporary directory so no user setting leaks in.
func (tl tools) template(t *testing.T, args ...string) objects {
	t.Helper()
	out, err := tl.templateErr(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, out)
}

func (tl tools) templateErr(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	return tl.Template(filepath.Join("helm", "gpuadmit"), args...)
}

// decoder decodes strictly: an unknown or duplicate field is an error, so a
// misspelt or misplaced field fails here instead of being dropped by the API server.
var decoder = func() runtime.Decoder {
	d, err := deploy.StrictDecoder(clientgoscheme.AddToScheme, cmv1.AddToScheme)
	if err != nil {
		panic(err)
	}
	return d
}()

// decode splits a YAML stream and decodes every document.
func decode(t *testing.T, stream []byte) objects {
	t.Helper()
	objs := objects{}
	err := deploy.DecodeStream(stream, decoder, func(obj runtime.Object, gvk *schema.GroupVersionKind) error {
		m, err := meta.Accessor(obj)
		if err != nil {
			return err
		}
		k := key{gvk.Kind, m.GetNamespace(), m.GetName()}
		if _, dup := objs[k]; dup {
			return fmt.Errorf("%s rendered twice", k)
		}
		objs[k] = obj
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) == 0 {
		t.Fatal("nothing rendered")
	}
	return objs
}

// get returns the object kind namespace/name as T, failing the test without it.
func get[T runtime.Object](t *testing.T, objs objects, kind, ns, name string) T {
	t.Helper()
	k := key{kind, ns, name}
	o, ok := objs[k]
	if !ok {
		t.Fatalf("no %s in the rendering; it has %v", k, objs.keys())
	}
	v, ok := o.(T)
	if !ok {
		t.Fatalf("%s decoded as %T", k, o)
	}
	return v
}

func (objs objects) keys() []string {
	var ks []string
	for k := range objs {
		ks = append(ks, k.String())
	}
	sort.Strings(ks)
	return ks
}

// devOverlay copies base and the dev overlay into a temporary tree with
// freshly made certificates, as `gpuadmit certs` would leave them.
func devOverlay(t *testing.T) (string, *certs.Bundle) {
	t.Helper()
	b := newBundle(t)
	dir, err := deploy.DevOverlay(".", t.TempDir(), b)
	if err != nil {
		t.Fatal(err)
	}
	return dir, b
}

// newBundle makes a development CA and serving certificate for the Service.
func newBundle(t *testing.T) *certs.Bundle {
	t.Helper()
	b, err := certs.Generate(certs.Options{Service: serviceName, Namespace: namespace})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ownPoliciesOverlay writes the overlay docs/policies.md shows a user who keeps
// their own policies: the configmap overlay, its generator's files
// replaced by files (name → content) beside it.
func ownPoliciesOverlay(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	base, err := filepath.Abs(filepath.Join("overlays", "configmap"))
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, base)
	if err != nil {
		t.Fatal(err)
	}
	k := "resources:\n  - " + rel + "\nconfigMapGenerator:\n  - name: gpuadmit-policies\n    namespace: gpuadmit-system\n    behavior: replace\n    files:\n"
	for name, content := range files {
		if err := os.MkdirAll(filepath.Join(dir, "policies"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "policies", name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		k += "      - policies/" + name + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// defaultPolicies reads the repository's default policy set as a ConfigMap
// would hold it: file name → content, for *.rego and *.yaml but
// kustomization.yaml, the file that makes that ConfigMap.
func defaultPolicies(t *testing.T) map[string]string {
	t.Helper()
	rego, err := filepath.Glob(filepath.Join("..", "policies", "*.rego"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := filepath.Glob(filepath.Join("..", "policies", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, p := range append(rego, data...) {
		if filepath.Base(p) == "kustomization.yaml" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(p)] = string(b)
	}
	return files
}

// variant is what every rendering is checked for, and what it adds.
type variant struct {
	// policies is the webhook's --policies argument; empty means the flag is absent.
	policies string
	// check asserts what this variant adds (certificates, policy source).
	check func(*testing.T, objects)
}

func TestKustomize(t *testing.T) {
	tl := findTools(t)
	devDir, bundle := devOverlay(t)
	ownPolicies := map[string]string{"decision.rego": "package gpuadmit\n", "data.yaml": "gpuadmit: {}\n"}
	tests := map[string]struct {
		dir string
		variant
	}{
		"base has no certificates": {dir: "base", variant: variant{check: all(checkNoCertificates, checkNoRecordKey)}},
		"cert-manager":             {dir: "overlays/cert-manager", variant: variant{check: all(checkCertManager, checkNoRecordKey)}},
		"dev with generated certs": {dir: devDir, variant: variant{check: all(checkSecretCA(bundle, true), checkDevRecordKey(devDir))}},
		"configmap policies": {dir: "overlays/configmap", variant: variant{
			policies: "--policies=/policies", check: all(checkCertManager, checkConfigMapPolicies(defaultPolicies(t)))}},
		"your own policies over the configmap overlay": {dir: ownPoliciesOverlay(t, ownPolicies), variant: variant{
			policies: "--policies=/policies", check: all(checkCertManager, checkConfigMapPolicies(ownPolicies))}},
		"git-sync policies": {dir: "overlays/git-sync", variant: variant{
			policies: "--policies=/git/current/policies", check: all(checkCertManager, checkGitSync)}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			objs := tl.build(t, tc.dir)
			checkCommon(t, objs, tc.policies)
			tc.check(t, objs)
		})
	}
}

func TestHelm(t *testing.T) {
	tl := findTools(t)
	bundle := newBundle(t)
	certDir := t.TempDir()
	if err := bundle.WriteDir(certDir); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(certDir, "ca.crt")
	policies := defaultPolicies(t)
	var policyFiles []string
	for name := range policies {
		abs, _ := filepath.Abs(filepath.Join("..", "policies", name))
		policyFiles = append(policyFiles, "--set-file", "policies.configMap.files."+strings.ReplaceAll(name, ".", `\.`)+"="+abs)
	}
	tests := map[string]struct {
		args []string
		// like is the overlay the rendering must equal, labels aside; empty skips that.
		like string
		variant
	}{
		"defaults are the cert-manager overlay": {like: "overlays/cert-manager", variant: variant{check: all(checkCertManager, checkNoRecordKey)}},
		"secret mode with a PEM caBundle": {
			args:    []string{"--set", "certificates.mode=secret", "--set-file", "certificates.secret.caBundle=" + caFile},
			variant: variant{check: checkSecretCA(bundle, false)}},
		"secret mode with the serving certificate as values": {
			args: []string{"--set", "certificates.mode=secret", "--set-file", "certificates.secret.caBundle=" + caFile,
				"--set-file", "certificates.secret.tlsCrt=" + filepath.Join(certDir, "tls.crt"), "--set-file", "certificates.secret.tlsKey=" + filepath.Join(certDir, "tls.key")},
			variant: variant{check: checkSecretCA(bundle, true)}},
		"secret mode with a base64 caBundle": {
			args:    []string{"--set", "certificates.mode=secret", "--set", "certificates.secret.caBundle=" + b64(bundle.CACert)},
			variant: variant{check: checkSecretCA(bundle, false)}},
		"configMap policies are the configmap overlay": {
			args: append([]string{"--set", "policies.source=configMap"}, policyFiles...), like: "overlays/configmap",
			variant: variant{policies: "--policies=/policies", check: checkConfigMapPolicies(policies)}},
		"configMap policies from an existing ConfigMap": {
			args:    []string{"--set", "policies.source=configMap"},
			variant: variant{policies: "--policies=/policies", check: checkConfigMapPolicies(nil)}},
		"gitSync policies are the git-sync overlay": {
			args: []string{"--set", "policies.source=gitSync"}, like: "overlays/git-sync",
			variant: variant{policies: "--policies=/git/current/policies", check: checkGitSync}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			objs := tl.template(t, tc.args...)
			checkCommon(t, objs, tc.policies)
			tc.check(t, objs)
			if tc.like != "" {
				equalExceptLabels(t, tl.build(t, tc.like), objs)
			}
		})
	}
}

// TestHelmRefuses checks that values which would make a broken webhook fail
// at render time rather than in the cluster.
func TestHelmRefuses(t *testing.T) {
	tl := findTools(t)
	tests := map[string]struct {
		args []string
		want string
	}{
		"secret mode without a CA": {args: []string{"--set", "certificates.mode=secret"}, want: "certificates.secret.caBundle is required"},
		"a certificate without its key": {args: []string{"--set", "certificates.mode=secret", "--set", "certificates.secret.caBundle=x", "--set", "certificates.secret.tlsCrt=x"},
			want: "tlsCrt and certificates.secret.tlsKey go together"},
		"an unknown certificates mode": {args: []string{"--set", "certificates.mode=manual"}, want: "certificates/mode"},
		"an unknown policy source":     {args: []string{"--set", "policies.source=git"}, want: "policies/source"},
		"a long webhook timeout":       {args: []string{"--set", "webhook.timeoutSeconds=30"}, want: "webhook/timeoutSeconds"},
		"no shares per GPU":            {args: []string{"--set", "agent.enabled=true", "--set", "agent.sharesPerGPU=0"}, want: "agent/sharesPerGPU"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := tl.templateErr(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("helm template %v: got error %v, want one containing %q", tc.args, err, tc.want)
			}
		})
	}
}

// equalExceptLabels compares two renderings object by object; only
// metadata.labels may differ (helm adds its own).
func equalExceptLabels(t *testing.T, want, got objects) {
	t.Helper()
	if diff := cmp.Diff(want.keys(), got.keys()); diff != "" {
		t.Fatalf("rendered objects (-overlay +helm):\n%s", diff)
	}
	for k, w := range want {
		if diff := cmp.Diff(unlabeled(t, w), unlabeled(t, got[k])); diff != "" {
			t.Errorf("%s (-overlay +helm):\n%s", k, diff)
		}
	}
}

func unlabeled(t *testing.T, obj runtime.Object) map[string]any {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	if md, ok := u["metadata"].(map[string]any); ok {
		delete(md, "labels")
	}
	return u
}

func all(checks ...func(*testing.T, objects)) func(*testing.T, objects) {
	return func(t *testing.T, objs objects) {
		t.Helper()
		for _, c := range checks {
			c(t, objs)
		}
	}
}
