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
// DeviceClasses and ValidatingAdmissionPolicies, RBAC, the
// Deployment, and cert-manager's CRD schemas for Certificates and Issuers).
func TestDeployManifestsAreAccepted(t *testing.T) {
	ctx := context.Background()
	tools, missing := deploy.FindTools(filepath.Join(root, ".bin/tools"))
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
	renders := map[string]func() ([]byte, error){
		"kustomize base":         func() ([]byte, error) { return tools.Build(filepath.Join(root, "deploy/base")) },
		"kustomize cert-manager": func() ([]byte, error) { return tools.Build(filepath.Join(root, "deploy/overlays/cert-manager")) },
		"kustomize dev":          func() ([]byte, error) { return tools.Build(dev) },
		"kustomize git-sync":     func() ([]byte, error) { return tools.Build(filepath.Join(root, "deploy/overlays/git-sync")) },
		"kustomize configmap":    func() ([]byte, error) { return tools.Build(filepath.Join(root, "deploy/overlays/configmap")) },
		"kustomize dra":          func() ([]byte, error) { return tools.Build(filepath.Join(root, "deploy/dra")) },
		"helm default":           func() ([]byte, error) { return tools.Template(filepath.Join(root, "deploy/helm/gpuadmit")) },
	}
	for name, render := range renders {
		t.Run(name, func(t *testing.T) {
			out, err := render()
			if err != nil {
				t.Fatalf("step render: %v", err)
			}
			n := dryRunAll(t, ctx, out)
			if n < 10 {
				t.Errorf("only %d objects rendered", n)
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
