package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/gpuadmit/gpuadmit/internal/policytest"
)

// preparePolicies lays out a policy root the way git-sync does: versions in
// directories, "current" a symlink the tests swap.
func preparePolicies() (string, error) {
	dir, err := os.MkdirTemp("", "gpuadmit-e2e-policies-")
	if err != nil {
		return "", err
	}
	if err := writePolicies(filepath.Join(dir, "v1"), nil); err != nil {
		return "", err
	}
	link := filepath.Join(dir, "current")
	return link, os.Symlink("v1", link)
}

// writePolicies writes the default set with files replaced.
func writePolicies(dir string, files map[string]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	set, err := policytest.Files(files)
	if err != nil {
		return err
	}
	for name, b := range set {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// swapPolicies points the webhook's policy path at another version, atomically.
func swapPolicies(t *testing.T, version string) {
	t.Helper()
	tmp := policyDir + ".tmp"
	os.Remove(tmp)
	if err := os.Symlink(version, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, policyDir); err != nil {
		t.Fatal(err)
	}
}

func readPod(t *testing.T, path string) *corev1.Pod {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := &corev1.Pod{}
	if err := yaml.UnmarshalStrict(b, p); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p
}

// gpuPod is a pod in namespace ns asking for GPU with the given limits.
func gpuPod(ns, name string, limits map[string]string) *corev1.Pod {
	p := &corev1.Pod{}
	p.Namespace, p.Name = ns, name
	c := corev1.Container{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{}}}
	for k, v := range limits {
		c.Resources.Limits[corev1.ResourceName(k)] = mustQuantity(v)
	}
	p.Spec.Containers = []corev1.Container{c}
	return p
}

// waitFor polls cond until it holds or the timeout passes, then fails with what it last saw.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, detail := cond()
		if ok {
			return
		}
		last = detail
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("step %q: not done after %s: %s", what, timeout, last)
}

// scheduledNode waits until the scheduler bound the pod and returns the node.
func scheduledNode(t *testing.T, ctx context.Context, p *corev1.Pod) string {
	t.Helper()
	got := &corev1.Pod{}
	waitFor(t, "schedule "+p.Name, 30*time.Second, func() (bool, string) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
			return false, err.Error()
		}
		return got.Spec.NodeName != "", fmt.Sprintf("pod conditions %v", got.Status.Conditions)
	})
	return got.Spec.NodeName
}

func deleteAll(ctx context.Context, ns string, pods ...*corev1.Pod) {
	for _, p := range pods {
		_ = env.Client.Delete(ctx, p, client.GracePeriodSeconds(0))
	}
}

// clearPods deletes every pod of the namespaces at once (grace 0) and waits
// until the API server holds none of them. A namespace's own deletion is
// graceful and paced by the namespace controller, so its pods would stay on
// the kwok nodes, holding GPUs, into the tests that run next.
func clearPods(t *testing.T, ctx context.Context, namespaces ...string) {
	t.Helper()
	for _, ns := range namespaces {
		if err := env.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0)); err != nil {
			t.Errorf("delete the pods of %s: %v", ns, err)
		}
	}
	waitFor(t, fmt.Sprintf("the pods of %v are gone", namespaces), 60*time.Second, func() (bool, string) {
		left := 0
		for _, ns := range namespaces {
			var pods corev1.PodList
			if err := env.Client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
				return false, err.Error()
			}
			left += len(pods.Items)
		}
		return left == 0, fmt.Sprintf("%d left", left)
	})
}

func readBack(t *testing.T, ctx context.Context, name string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: name}, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// counters reads the counter family from the webhook's registry in this
// process (controller-runtime's, which the in-process webhook serves) and
// sums it by the value of label.
func counters(t *testing.T, family, label string) map[string]float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}
