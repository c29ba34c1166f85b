package e2e

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
	"github.com/gpuadmit/gpuadmit/pkg/quota"
)

const memHard = "requests." + inventory.ResourceMemoryMiB

// quotaNamespaces are declared in the "quotas" policy version below.
var quotaDecls = `gpuadmit:
  quotas:
  - {namespaces: [quota-peer], gpuMemory: 163840Mi}
  - {namespaces: [quota-init], gpuMemory: 7680Mi}
  - {namespaces: [quota-mig], gpuMemory: 16Gi, models: {H100-80GB: 9984Mi}}
  - {namespaces: [quota-race], gpuMemory: 142080Mi}
  - {namespaces: [quota-mix], gpuMemory: 200000Mi}
  - {namespaces: [quota-edit], gpuMemory: %s}
  - {namespaces: [quota-dra], gpuMemory: 40Gi}
  - {namespaces: [quota-nopolicy], gpuMemory: 10Gi}
`

// useQuotas swaps in a policy version declaring quotas; edit sets quota-edit's gpuMemory.
func useQuotas(t *testing.T, version, edit string) {
	t.Helper()
	dir := filepath.Join(filepath.Dir(policyDir), version)
	if err := writePolicies(dir, map[string]string{"quotas.yaml": fmt.Sprintf(quotaDecls, edit)}); err != nil {
		t.Fatal(err)
	}
	swapPolicies(t, version)
}

// quotaReady waits until gpuadmit's ResourceQuota in ns has hard as declared and its status computed.
func quotaReady(t *testing.T, ctx context.Context, ns string, mib int64) *corev1.ResourceQuota {
	t.Helper()
	q := &corev1.ResourceQuota{}
	waitFor(t, "quota of "+ns, 30*time.Second, func() (bool, string) {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: quota.Name}, q); err != nil {
			return false, err.Error()
		}
		h, s := q.Spec.Hard[memHard], q.Status.Hard[memHard]
		return h.Value() == mib && s.Value() == mib, fmt.Sprintf("spec %s, status %s", h.String(), s.String())
	})
	return q
}

func usedMiB(t *testing.T, ctx context.Context, ns string) int64 {
	t.Helper()
	q := &corev1.ResourceQuota{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: quota.Name}, q); err != nil {
		t.Fatal(err)
	}
	u := q.Status.Used[memHard]
	return u.Value()
}

func makeNamespaces(t *testing.T, ctx context.Context, names ...string) {
	t.Helper()
	for _, n := range names {
		ns := &corev1.Namespace{}
		ns.Name = n
		if err := env.Client.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
}

func isQuotaDenial(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "exceeded quota") || strings.Contains(err.Error(), "left under its quota"))
}

// TestQuotasDeclaredInGit: the reconciler creates ResourceQuotas from the
// policy set's quotas.yaml, and the API server enforces them on what gpuadmit
// really gives: multi-GPU pods count every GPU at its real size, init
// containers count as Kubernetes counts them, MIG slices at their real MiB.
func TestQuotasDeclaredInGit(t *testing.T) {
	ctx := context.Background()
	namespaces := []string{"quota-peer", "quota-init", "quota-mig", "quota-race", "quota-mix", "quota-edit"}
	makeNamespaces(t, ctx, namespaces...)
	// Its pods hold whole A100s, H100 slices and T4 shares that the tests
	// after it place pods on.
	t.Cleanup(func() { clearPods(t, ctx, namespaces...) })
	useQuotas(t, "quotas", "8Gi")
	defer swapPolicies(t, "v1")

	t.Run("multi-GPU pods count every GPU", func(t *testing.T) {
		quotaReady(t, ctx, "quota-peer", 163840)
		// 2 GPUs × 2048 MiB: a multi-GPU request takes whole GPUs first (a CUDA
		// process sees one MIG device), two A100-80GB here: 2 × 81920 MiB.
		if err := env.Client.Create(ctx, gpuPod("quota-peer", "two", map[string]string{"nvidia.com/gpu": "2", "nvidia.com/gpumem": "2048"})); err != nil {
			t.Fatalf("the 2-GPU pod: %v", err)
		}
		if u := usedMiB(t, ctx, "quota-peer"); u != 163840 {
			t.Errorf("used %d MiB, want 163840 (both GPUs at their real size)", u)
		}
		err := env.Client.Create(ctx, gpuPod("quota-peer", "more", map[string]string{"nvidia.com/gpumem": "1024"}))
		if !isQuotaDenial(err) {
			t.Errorf("a further 1024 MiB pod: err = %v, want a quota denial", err)
		}
	})
	t.Run("init containers count as Kubernetes counts them", func(t *testing.T) {
		quotaReady(t, ctx, "quota-init", 7680)
		p := gpuPod("quota-init", "init", map[string]string{"nvidia.com/gpumem": "1000"})
		p.Spec.Containers = append(p.Spec.Containers, *p.Spec.Containers[0].DeepCopy())
		p.Spec.Containers[1].Name = "second"
		p.Spec.InitContainers = []corev1.Container{*p.Spec.Containers[0].DeepCopy()}
		p.Spec.InitContainers[0].Name = "prepare"
		p.Spec.InitContainers[0].Resources.Limits["nvidia.com/gpumem"] = mustQuantity("3000")
		p.Annotations = map[string]string{"gpuadmit.io/backend": "shared"}
		// Each container takes one 3840 MiB share of a T4: the init container
		// one, the two app containers two; the pod holds max(3840, 7680),
		// not the sum 11520.
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatalf("init 3000 MiB + 2 × 1000 MiB against 7680 MiB: %v", err)
		}
		if u := usedMiB(t, ctx, "quota-init"); u != 7680 {
			t.Errorf("used %d MiB, want 7680", u)
		}
	})
	t.Run("MIG slices count at their real size", func(t *testing.T) {
		quotaReady(t, ctx, "quota-mig", 16384)
		if err := env.Client.Create(ctx, gpuPod("quota-mig", "slice", map[string]string{"nvidia.com/mig-1g.10gb": "1"})); err != nil {
			t.Fatal(err)
		}
		if u := usedMiB(t, ctx, "quota-mig"); u != 9984 {
			t.Errorf("used %d MiB, want 9984 (the slice's real size, not 10240)", u)
		}
		err := env.Client.Create(ctx, gpuPod("quota-mig", "second", map[string]string{"nvidia.com/mig-1g.10gb": "1"}))
		if err == nil || !strings.Contains(err.Error(), "h100-80gb-mib") {
			t.Errorf("a second H100 slice against 9984 MiB of H100: err = %v, want the per-model quota", err)
		}
	})
	t.Run("100 concurrent creates, room for exactly 37", func(t *testing.T) {
		quotaReady(t, ctx, "quota-race", 37*3840) // 37 T4 shares of 3840 MiB
		admitted := createConcurrently(t, ctx, "quota-race", 100, func(i int) map[string]string {
			return map[string]string{"gpuadmit.io/gpu-mem": "1"}
		})
		var pods corev1.PodList
		_ = env.Client.List(ctx, &pods, client.InNamespace("quota-race"))
		if admitted != 37 || len(pods.Items) != 37 {
			given := map[string]int{}
			for _, p := range pods.Items {
				given[p.Annotations[record.AnnotationDecision]]++
			}
			q := &corev1.ResourceQuota{}
			_ = env.Client.Get(ctx, client.ObjectKey{Namespace: "quota-race", Name: quota.Name}, q)
			t.Errorf("%d admitted, %d pods exist; want exactly 37; decisions %v; quota %v, created %s, labels %v, hard %v, used %v",
				admitted, len(pods.Items), given, q.UID, q.CreationTimestamp, q.Labels, q.Spec.Hard, q.Status.Used)
		}
		clearPods(t, ctx, "quota-race") // their T4 shares are needed by the next subtests
	})
	t.Run("a mix of MIG, share and whole-GPU pods", func(t *testing.T) {
		quotaReady(t, ctx, "quota-mix", 200000)
		sizes := []map[string]string{{"nvidia.com/gpu": "1"}, {"nvidia.com/mig-1g.10gb": "1"}, {"gpuadmit.io/gpu-mem": "2"}}
		createConcurrently(t, ctx, "quota-mix", 60, func(i int) map[string]string { return sizes[i%3] })
		used := usedMiB(t, ctx, "quota-mix")
		if used > 200000 || 200000-used >= 3840 { // the smallest pod holds one 3840 MiB share
			t.Errorf("used %d MiB of 200000: over the quota, or a pod was refused that fitted", used)
		}
	})
	t.Run("gpuadmit quota reports usage", func(t *testing.T) {
		var out bytes.Buffer
		if err := quota.Report(ctx, env.Client, &out); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`quota-mig\s+GPU memory\s+9\.8 GiB\s+16\.0 GiB`, `quota-mig\s+h100-80gb memory\s+9\.8 GiB\s+9\.8 GiB`} {
			if !regexp.MustCompile(want).MatchString(out.String()) {
				t.Errorf("report lacks %q:\n%s", want, out.String())
			}
		}
	})
	t.Run("editing quotas.yaml", func(t *testing.T) { editQuotas(t, ctx) })
}

// createConcurrently creates n GPU pods from 20 clients and returns how many
// were admitted; every refusal must be a quota refusal.
func createConcurrently(t *testing.T, ctx context.Context, ns string, n int, limits func(int) map[string]string) int {
	t.Helper()
	var mu sync.Mutex
	admitted := 0
	var wg sync.WaitGroup
	for c := 0; c < 20; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := c; i < n; i += 20 {
				err := env.Client.Create(ctx, gpuPod(ns, fmt.Sprintf("p-%03d", i), limits(i)))
				mu.Lock()
				switch {
				case err == nil:
					admitted++
				case !isQuotaDenial(err):
					t.Errorf("pod %d refused for another reason: %v", i, err)
				}
				mu.Unlock()
			}
		}(c)
	}
	wg.Wait()
	return admitted
}

// editQuotas: a new revision changes the ResourceQuota within seconds, an
// invalid file is refused and the last good quota stays, a hand edit is reverted.
func editQuotas(t *testing.T, ctx context.Context) {
	quotaReady(t, ctx, "quota-edit", 8192)
	useQuotas(t, "quotas-16", "16Gi")
	start := time.Now()
	quotaReady(t, ctx, "quota-edit", 16384)
	t.Logf("quotas.yaml edit reached the ResourceQuota in %s", time.Since(start).Round(time.Millisecond))

	useQuotas(t, "quotas-bad", "lots")
	waitFor(t, "invalid quotas refused", 20*time.Second, func() (bool, string) {
		r := env.Readyz()
		return strings.Contains(r, "NOT activated") && strings.Contains(r, "quotas"), r
	})
	quotaReady(t, ctx, "quota-edit", 16384)

	q := quotaReady(t, ctx, "quota-edit", 16384)
	q.Spec.Hard[memHard] = mustQuantity("999999")
	if err := env.Client.Update(ctx, q); err != nil {
		t.Fatal(err)
	}
	quotaReady(t, ctx, "quota-edit", 16384)
}

// TestDRAShareQuotaInMiB: ResourceQuota counts a DRA claim as one device
// whatever its memory; the accounting requests gpuadmit keeps on a share
// pod count its MiB, so a namespace's MiB quota admits exactly what fits.
func TestDRAShareQuotaInMiB(t *testing.T) {
	ctx := context.Background()
	makeNamespaces(t, ctx, "quota-dra")
	t.Cleanup(func() { clearPods(t, ctx, "quota-dra") })
	useQuotas(t, "quotas-dra", "8Gi")
	defer swapPolicies(t, "v1")
	quotaReady(t, ctx, "quota-dra", 40*1024)
	draNamespace(t, ctx, "quota-dra-classes")
	draPoolNode(t, ctx, "quota-dra-0", "quota-dra-pool", 2)
	share := func(name, size string) *corev1.Pod {
		p := gpuPod("quota-dra", name, map[string]string{"gpuadmit.io/gpu-memory": size})
		p.Annotations = map[string]string{"gpuadmit.io/backend": "shared", "gpuadmit.io/model": "A100-40GB"}
		return p
	}
	waitAdmitted(t, ctx, "the DRA pool in the inventory", share("probe", "30Gi"))
	if err := env.Client.Create(ctx, share("thirty", "30Gi")); err != nil {
		t.Fatalf("30 GiB against 40 GiB: %v", err)
	}
	if err := env.Client.Create(ctx, share("twenty", "20Gi")); !isQuotaDenial(err) {
		t.Errorf("a further 20 GiB: err = %v, want a quota denial", err)
	}
	if err := env.Client.Create(ctx, share("ten", "10Gi")); err != nil {
		t.Errorf("a further 10 GiB, exactly what is left: %v", err)
	}
	if u := usedMiB(t, ctx, "quota-dra"); u != 40*1024 {
		t.Errorf("used %d MiB, want 40960", u)
	}
}

// TestQuotaLeaderWithoutAPolicyKeepsQuotas: a webhook replica that leads the
// quota reconciler but has no policy set it can activate (the only set on
// disk does not compile) has no declarations to read; that is not
// declarations that govern nothing, so it must leave gpuadmit's
// ResourceQuotas alone. Before, it deleted every one of them.
func TestQuotaLeaderWithoutAPolicyKeepsQuotas(t *testing.T) {
	ctx := context.Background()
	makeNamespaces(t, ctx, "quota-nopolicy")
	useQuotas(t, "quotas-nopolicy", "8Gi")
	quotaReady(t, ctx, "quota-nopolicy", 10*1024)

	env.StopWebhook()
	dir := filepath.Join(filepath.Dir(policyDir), "broken")
	if err := writePolicies(dir, map[string]string{"broken.rego": "package gpuadmit\n\nthis is not rego\n"}); err != nil {
		t.Fatal(err)
	}
	swapPolicies(t, "broken")
	defer func() {
		env.StopWebhook()
		swapPolicies(t, "v1")
		if err := env.StartWebhook(ctx); err != nil {
			t.Fatalf("restart the webhook on v1: %v", err)
		}
	}()
	before := reconciles(t)
	if err := env.StartWebhookUnready(ctx); err != nil {
		t.Fatal(err)
	}
	var namespaces corev1.NamespaceList
	if err := env.Client.List(ctx, &namespaces); err != nil {
		t.Fatal(err)
	}
	// The reconciler goes through every namespace at start; once it has,
	// whatever it would do to quota-nopolicy's quota is done.
	waitFor(t, "the quota reconciler visits every namespace", 30*time.Second, func() (bool, string) {
		n := reconciles(t) - before
		return n >= float64(len(namespaces.Items)), fmt.Sprintf("%v of %d reconciled", n, len(namespaces.Items))
	})
	q := &corev1.ResourceQuota{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "quota-nopolicy", Name: quota.Name}, q); err != nil {
		t.Errorf("gpuadmit's ResourceQuota in quota-nopolicy, with no policy set active: %v", err)
	}
}

// reconciles is how many times the quota reconciler has run in this process.
func reconciles(t *testing.T) float64 {
	return counters(t, "controller_runtime_reconcile_total", "controller")["gpuadmit-quota"]
}
