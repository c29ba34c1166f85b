package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpuadmit/gpuadmit/certs"
	"github.com/gpuadmit/gpuadmit/deploy"
)

// TestDeployManifestsAreAccepted applies every kustomize overlay and the Helm
// chart to the API server with server-side dry run: each object passes the
// real validation (webhook configurations and their CEL, deploy/dra's
// DeviceClasses and ValidatingAdmissionPolicies, RBAC, the Deployment, and
// cert-manager's CRD schemas for Certificates and Issuers), and so do the
// node agent's (deploy/agent, with MPS, and the chart's): its DaemonSets,
// its own-node ValidatingAdmissionPolicy and its CEL; and gpuadmit-scheduler's
// (deploy/scheduler, and the chart's): its Deployment, RBAC and ConfigMap.
func TestDeployManifestsAreAccepted(t *testing.T) {
	ctx := context.Background()
	dir := os.Getenv("GPUADMIT_TOOLS") // as deploy's render tests look for them
	if dir == "" {
		dir = filepath.Join(root, ".bin/tools")
	}
	tools, missing := deploy.FindTools(dir)
	if len(missing) > 0 {
		if os.Getenv("GPUADMIT_REQUIRE_TOOLS") == "1" {
			t.Fatalf("%v missing: run hack/tools.sh", missing)
		}
		t.Skipf("%v missing: run hack/tools.sh", missing)
	}
	// Namespaced objects need their namespace to exist, even in a dry run.
	for _, name := range []string{"gpuadmit-system", "gpuadmit-agent"} {
		ns := &corev1.Namespace{}
		ns.Name = name
		if err := env.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	bundle, err := certs.Generate(certs.Options{Service: "gpuadmit-webhook", Namespace: "gpuadmit-system"})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := deploy.DevOverlay(filepath.Join(root, "deploy"), t.TempDir(), bundle)
	if err != nil {
		t.Fatal(err)
	}
	loopback := filepath.Join(filepath.Dir(dev), "dev-loopback")
	if err := os.CopyFS(loopback, os.DirFS(filepath.Join(root, "deploy/overlays/dev-loopback"))); err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(root, "deploy/helm/gpuadmit")
	renders := map[string]struct {
		render func() ([]byte, error)
		least  int // objects the rendering holds at least
	}{
		"kustomize base":         {func() ([]byte, error) { return tools.Build(filepath.Join(root, "deploy/base")) }, 10},
		"kustomize cert-manager": {func() ([]byte, error) { return tools.Build(filepath.Join(root, "deploy/overlays/cert-manager")) }, 10},
		"kustomize dev":          {func() ([]byte, error) { return tools.Build(dev) }, 10},
		"kustomize dev-loopback": {func() ([]byte, error) { return tools.Build(loopback) }, 10},
		"kustomize git-sync":     {func() ([]byte, error) { return tools.Build(filepath.Join(root, "deploy/overlays/git-sync")) }, 10},
		"kustomize configmap":    {func() ([]byte, error) { return tools.Build(filepath.Join(root, "deploy/overlays/configmap")) }, 10},
		"kustomize agent":        {func() ([]byte, error) { return tools.Build(filepath.Join(root, "deploy/agent")) }, 7},
		"kustomize agent-mps":    {func() ([]byte, error) { return tools.Build(filepath.Join(root, "deploy/overlays/agent-mps")) }, 8},
		"kustomize dra":          {func() ([]byte, error) { return tools.Build(filepath.Join(root, "deploy/dra")) }, 10},
		"kustomize scheduler":    {func() ([]byte, error) { return tools.Build(filepath.Join(root, "deploy/scheduler")) }, 8},
		"helm default":           {func() ([]byte, error) { return tools.Template(chart) }, 10},
		"helm agent with MPS": {func() ([]byte, error) {
			return tools.Template(chart, "--set", "agent.enabled=true", "--set", "agent.mps.enabled=true")
		}, 18},
		"helm agent and DRA driver": {func() ([]byte, error) {
			return tools.Template(chart, "--set", "agent.enabled=true", "--set", "dra.enabled=true")
		}, 40},
		"helm webhook URL on the host network": {func() ([]byte, error) {
			return tools.Template(chart, "--set", "webhook.url=https://127.0.0.1:9443", "--set", "webhook.hostNetwork=true", "--set", "replicas=1")
		}, 10},
		"helm scheduler": {func() ([]byte, error) {
			return tools.Template(chart, "--set", "scheduler.enabled=true")
		}, 18},
	}
	for name, r := range renders {
		t.Run(name, func(t *testing.T) {
			out, err := r.render()
			if err != nil {
				t.Fatalf("step render: %v", err)
			}
			if n := dryRunAll(t, ctx, out); n < r.least {
				t.Errorf("only %d objects rendered, want at least %d", n, r.least)
			}
		})
	}
}

func dryRunAll(t *testing.T, ctx context.Context, stream []byte) int {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytesReader(stream), 4096)
	n := 0
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if err.Error() == "EOF" {
				return n
			}
			t.Fatalf("decode: %v", err)
		}
		if len(u.Object) == 0 {
			continue
		}
		n++
		err := env.Client.Create(ctx, u, client.DryRunAll)
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Errorf("%s %s/%s rejected: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
}
