package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/gpuadmit/gpuadmit/pkg/mutate"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

// kueueNamespace is where Kueue keeps its webhook certificate Secret.
const kueueNamespace = "kueue-system"

// startKueue installs Kueue's CRDs and runs Kueue's own controller manager
// (hack/e2e-binaries.sh builds it from Kueue's Go module) with the batch/v1
// Job integration. Kueue's admission webhooks are not registered: the API
// server here reaches webhooks by URL on loopback, and Kueue's generated
// certificate names only its Service's DNS name. Those webhooks default and
// validate Kueue's objects and suspend new Jobs; the test writes valid
// objects and creates its Job suspended, as Kueue's webhook would leave it.
// Kueue's internal certificate management runs as deployed; the CRDs'
// conversion webhooks point at Kueue's server so it can inject its CA, and
// every object is written and read at the storage version, v1beta2, so no
// conversion is ever asked for.
func startKueue(t *testing.T, ctx context.Context) {
	t.Helper()
	bin := filepath.Dir(mustBinary(t, "kueue"))
	crds, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Join(bin, "kueue-crds")}, ErrorIfPathMissing: true})
	if err != nil {
		t.Fatalf("install Kueue's CRDs: %v", err)
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	ext, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kueueNamespace}}
	if err := env.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// Kueue's manifests ship the Secret its certificate rotator fills.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kueue-webhook-server-cert", Namespace: kueueNamespace}}
	if err := env.Client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certDir := filepath.Join(dir, "certs")
	var certsWritten bool
	// Kueue binds the webhook and probe addresses it is configured with
	// itself; a start that finds one taken since it was chosen is made again
	// on new ones, with the conversion webhooks pointed at the new address.
	args := func(addrs []string) ([]string, error) {
		webhookAddr, probeAddr := addrs[0], addrs[1]
		certsWritten = false
		if err := pointConversion(ctx, ext, crds, "https://"+webhookAddr+"/convert"); err != nil {
			return nil, err
		}
		config := kueueConfig(t, probeAddr, webhookAddr, certDir)
		if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(config), 0o600); err != nil {
			return nil, err
		}
		// Kueue runs as the cluster's admin here; its RBAC is its own project's.
		return []string{"--config=" + filepath.Join(dir, "config.yaml"), "--kubeconfig=" + env.Kubeconfig, "--zap-log-level=2"}, nil
	}
	// In a pod the kubelet mounts that Secret at the certificate directory,
	// and Kueue waits for the files; here the test writes them once the
	// rotator has filled the Secret, and then waits for Kueue's readiness.
	ready := func(addrs []string) (bool, string) {
		if !certsWritten {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
				return false, err.Error()
			}
			if len(secret.Data["tls.crt"]) == 0 {
				return false, fmt.Sprintf("Kueue's certificate Secret: keys %d", len(secret.Data))
			}
			if err := os.MkdirAll(certDir, 0o700); err != nil {
				t.Fatal(err)
			}
			for k, v := range secret.Data {
				if err := os.WriteFile(filepath.Join(certDir, k), v, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			certsWritten = true
		}
		return httpOK("http://" + addrs[1] + "/readyz")
	}
	_, stop, err := env.StartOnPorts("kueue", 2, 120*time.Second, args, ready)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of Kueue's log:\n%s", env.Tail("kueue", 25))
		}
		stop()
	})
}

// pointConversion points the conversion webhook of Kueue's CRDs that
// convert between versions at url, Kueue's webhook server.
func pointConversion(ctx context.Context, ext client.Client, crds []*apiextensionsv1.CustomResourceDefinition, url string) error {
	for _, crd := range crds {
		switch crd.Name {
		case "localqueues.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io", "workloads.kueue.x-k8s.io", "cohorts.kueue.x-k8s.io", "multikueueclusters.kueue.x-k8s.io":
		default:
			continue
		}
		cur := &apiextensionsv1.CustomResourceDefinition{}
		if err := ext.Get(ctx, client.ObjectKey{Name: crd.Name}, cur); err != nil {
			return err
		}
		cur.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"},
				ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: ptr.To(url)}}}
		if err := ext.Update(ctx, cur); err != nil {
			return fmt.Errorf("point %s's conversion at Kueue: %w", crd.Name, err)
		}
	}
	return nil
}

// kueueConfig is Kueue's Configuration: its probes on probeAddr, its
// webhook server on webhookAddr with certificates from certDir, no metrics
// server, and the batch/v1 Job integration. The visibility API server, on by
// default, is off: it would bind a fixed port (8082) on every interface and
// write its certificate under /visibility, and the test does not use it.
func kueueConfig(t *testing.T, probeAddr, webhookAddr, certDir string) string {
	host, port := splitHostPort(t, webhookAddr)
	return fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: %s
health:
  healthProbeBindAddress: %s
metrics:
  bindAddress: "0"
webhook:
  host: %s
  port: %d
  certDir: %s
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: true
  webhookServiceName: kueue-webhook-service
  webhookSecretName: kueue-webhook-server-cert
integrations:
  frameworks: ["batch/job"]
featureGates:
  VisibilityOnDemand: false
`, kueueNamespace, probeAddr, host, port, certDir)
}

// kueueObjects are a ClusterQueue with two flavors, T4 nodes listed first
// and A100 MIG 1g.5gb nodes, both with room for everything the queue
// covers: the GPU, gpuadmit's GPU memory and the A100's memory. A LocalQueue
// in team-a sends to it.
const kueueObjects = `
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: t4}
spec: {nodeLabels: {nvidia.com/gpu.product: Tesla-T4}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: a100-mig-1g}
spec: {nodeLabels: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-40GB-MIG-1g.5gb}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: gpu}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu, gpuadmit.io/gpu-memory-mib, gpuadmit.io/a100-40gb-mib]
    flavors:
    - name: t4
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 8}
      - {name: gpuadmit.io/gpu-memory-mib, nominalQuota: 200000}
      - {name: gpuadmit.io/a100-40gb-mib, nominalQuota: 200000}
    - name: a100-mig-1g
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 8}
      - {name: gpuadmit.io/gpu-memory-mib, nominalQuota: 200000}
      - {name: gpuadmit.io/a100-40gb-mib, nominalQuota: 200000}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: gpu, namespace: team-a}
spec: {clusterQueue: gpu}
`

// TestKueueJobIsAdmittedOnTheGPUItsPodsGet runs Kueue's controllers with
// gpuadmit: a Job in a Kueue queue asking in HAMi's dialect for 3000 MiB
// has its template decided when it is created (a MIG 1g.5gb slice on an
// A100, 4864 MiB); Kueue admits it on that (its workload counts the slice
// and the GPU memory gpuadmit accounts, in the flavor whose node labels
// agree with the pool's, not the T4 flavor listed first); the pod the Job
// controller makes carries Kueue's flavor and passes gpuadmit unchanged,
// and is scheduled on the A100 MIG node.
func TestKueueJobIsAdmittedOnTheGPUItsPodsGet(t *testing.T) {
	ctx := context.Background()
	startKueue(t, ctx)
	createKueueObjects(t, ctx, kueueObjects)

	asked := readPod(t, filepath.Join(root, "examples/pods/hami-memory.yaml"))
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "kueue-train", Namespace: "team-a", Labels: map[string]string{mutate.LabelKueueQueue: "gpu"}},
		Spec:       batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: asked.Spec}},
	}
	job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatalf("create the Kueue Job: %v", err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), job, client.PropagationPolicy(metav1.DeletePropagationBackground))
	})
	tmpl := job.Spec.Template
	limits := tmpl.Spec.Containers[0].Resources.Limits
	if _, hami := limits["nvidia.com/gpumem"]; hami || tmpl.Annotations[record.AnnotationDecision] == "" {
		t.Fatalf("the Job's template was not decided when it was created: limits %v, annotations %v", limits, tmpl.Annotations)
	}
	if got := tmpl.Spec.NodeSelector["nvidia.com/gpu.product"]; got != "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb" {
		t.Fatalf("the template is not on the A100 MIG 1g.5gb pool: nodeSelector %v", tmpl.Spec.NodeSelector)
	}

	// Kueue's workload counts the decided template, in the agreeing flavor.
	wl := workloadOf(t, ctx, job)
	assignments, _, _ := unstructured.NestedSlice(wl.Object, "status", "admission", "podSetAssignments")
	first, _ := assignments[0].(map[string]any)
	flavors, _, _ := unstructured.NestedStringMap(first, "flavors")
	usage, _, _ := unstructured.NestedStringMap(first, "resourceUsage")
	if flavors["nvidia.com/gpu"] != "a100-mig-1g" {
		t.Errorf("Kueue assigned flavors %v, want a100-mig-1g, the flavor whose nodes the pool's are", flavors)
	}
	if usage["gpuadmit.io/gpu-memory-mib"] != "4864" || usage["nvidia.com/gpu"] != "1" {
		t.Errorf("Kueue counts %v, want the slice gpuadmit gives: nvidia.com/gpu 1, gpuadmit.io/gpu-memory-mib 4864", usage)
	}

	// The Job controller's pod, once Kueue started the Job.
	var pod corev1.Pod
	waitFor(t, "the Job's pod", 60*time.Second, func() (bool, string) {
		var pods corev1.PodList
		if err := env.Client.List(ctx, &pods, client.InNamespace("team-a"), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
			return false, err.Error()
		}
		if len(pods.Items) == 0 {
			cur := &batchv1.Job{}
			_ = env.Client.Get(ctx, client.ObjectKeyFromObject(job), cur)
			return false, fmt.Sprintf("no pod yet; job suspended %v, conditions %v\n%s", ptr.Deref(cur.Spec.Suspend, false), cur.Status.Conditions, env.Tail("kube-controller-manager", 5))
		}
		pod = pods.Items[0]
		return true, ""
	})
	c := pod.Spec.Containers[0]
	for k, q := range tmpl.Spec.Containers[0].Resources.Limits {
		if got := c.Resources.Limits[k]; got.Cmp(q) != 0 {
			t.Errorf("the pod's %s limit is %s, its decided template's %s", k, got.String(), q.String())
		}
	}
	if len(c.Resources.Limits) != len(tmpl.Spec.Containers[0].Resources.Limits) {
		t.Errorf("the pod's limits %v differ from its decided template's %v", c.Resources.Limits, tmpl.Spec.Containers[0].Resources.Limits)
	}
	if pod.Annotations[record.AnnotationDecision] != tmpl.Annotations[record.AnnotationDecision] {
		t.Errorf("gpuadmit decided the pod again:\n pod:      %s\n template: %s", pod.Annotations[record.AnnotationDecision], tmpl.Annotations[record.AnnotationDecision])
	}
	if pod.Labels[mutate.LabelKueuePodSet] == "" {
		t.Errorf("the pod has no Kueue podset label: Kueue did not start it (labels %v)", pod.Labels)
	}
	if node := scheduledNode(t, ctx, &pod); !strings.Contains(node, "a100") {
		t.Errorf("the pod was scheduled on %s, want the A100 MIG node", node)
	}
}

// workloadOf waits until Kueue admitted the Job's workload and returns it.
func workloadOf(t *testing.T, ctx context.Context, job *batchv1.Job) *unstructured.Unstructured {
	t.Helper()
	var wl *unstructured.Unstructured
	waitFor(t, "Kueue admits the Job's workload", 60*time.Second, func() (bool, string) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "WorkloadList"})
		if err := env.Client.List(ctx, list, client.InNamespace(job.Namespace)); err != nil {
			return false, err.Error()
		}
		for i := range list.Items {
			w := &list.Items[i]
			for _, o := range w.GetOwnerReferences() {
				if o.Kind != "Job" || o.Name != job.Name {
					continue
				}
				if _, admitted, _ := unstructured.NestedMap(w.Object, "status", "admission"); admitted {
					wl = w
					return true, ""
				}
				conds, _, _ := unstructured.NestedSlice(w.Object, "status", "conditions")
				return false, fmt.Sprintf("workload %s not admitted: %v", w.GetName(), conds)
			}
		}
		return false, fmt.Sprintf("no workload for the Job among %d\n%s", len(list.Items), env.Tail("kueue", 5))
	})
	return wl
}

// mustBinary is a component hack/e2e-binaries.sh built, or fails the test.
func mustBinary(t *testing.T, name string) string {
	t.Helper()
	bin := os.Getenv("GPUADMIT_E2E_BIN")
	if bin == "" {
		bin = filepath.Join(root, "test/e2e/.bin/v1.37.0")
	}
	path := filepath.Join(bin, name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is missing (hack/e2e-binaries.sh builds it): %v", name, err)
	}
	return path
}

func splitHostPort(t *testing.T, addr string) (string, int) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return host, n
}

// httpOK reports whether url answers 200, or what it answered.
func httpOK(url string) (bool, string) {
	// A port taken by another process may accept and never answer; the
	// timeout lets the caller see its own process exit instead.
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK, resp.Status
}

// createKueueObjects creates Kueue's objects of a YAML stream (documents
// separated by "---" lines) and deletes them after the test.
func createKueueObjects(t *testing.T, ctx context.Context, objects string) {
	t.Helper()
	for _, doc := range strings.Split(objects, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Create(ctx, u); err != nil {
			t.Fatalf("create Kueue %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), u) })
	}
}
