package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/gpuadmit/gpuadmit/pkg/mutate"
)

// TestControllerPodsShareOneDecision: the pods that the real job and
// StatefulSet controllers create from one template differ in their names,
// index labels and annotations, and spec.hostname (an indexed Job's pods and
// a StatefulSet's are each given one of their own). None of that is what the
// policies read, so gpuadmit's decision memo answers every pod of a workload
// but the first, and every pod gets the same rewrite.
func TestControllerPodsShareOneDecision(t *testing.T) {
	ctx := context.Background()
	const ns = "team-a"
	// A request no other test makes, so that the first pod of each workload
	// is the only one that may miss the memo.
	limits := corev1.ResourceList{"gpuadmit.io/gpu-memory": mustQuantity("3333Mi")}
	template := func(app string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app, "gpuadmit.io/class": "inference"}},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{Limits: limits}}},
			},
		}
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "memo-indexed"}, Spec: batchv1.JobSpec{
		CompletionMode: ptr.To(batchv1.IndexedCompletion), Completions: ptr.To[int32](4), Parallelism: ptr.To[int32](4),
		Template: template("memo-indexed"),
	}}
	job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "memo-sts"}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To[int32](3), ServiceName: "memo-sts", PodManagementPolicy: appsv1.ParallelPodManagement,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "memo-sts"}},
		Template: template("memo-sts"),
	}}
	before := memoLookups(t)
	for _, w := range []client.Object{job, sts} {
		if err := env.Client.Create(ctx, w); err != nil {
			t.Fatalf("step create %T: %v", w, err)
		}
	}
	defer func() {
		for _, w := range []client.Object{job, sts} {
			_ = env.Client.Delete(ctx, w, client.PropagationPolicy(metav1.DeletePropagationBackground))
		}
		for _, app := range []string{"memo-indexed", "memo-sts"} {
			_ = env.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.MatchingLabels{"app": app}, client.GracePeriodSeconds(0))
		}
	}()
	for app, want := range map[string]int{"memo-indexed": 4, "memo-sts": 3} {
		var pods corev1.PodList
		waitFor(t, fmt.Sprintf("%d pods of %s", want, app), 60*time.Second, func() (bool, string) {
			if err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": app}); err != nil {
				return false, err.Error()
			}
			return len(pods.Items) >= want, fmt.Sprintf("%d pods", len(pods.Items))
		})
		hostnames := map[string]bool{}
		rewrites := map[string]bool{}
		for _, p := range pods.Items {
			hostnames[p.Spec.Hostname] = true
			if p.Annotations[mutate.AnnotationDecision] == "" {
				t.Errorf("%s: pod %s was not rewritten: annotations %v", app, p.Name, p.Annotations)
			}
			rewrites[fmt.Sprintf("%s; nodeSelector %v; limits %v", p.Annotations[mutate.AnnotationDecision], p.Spec.NodeSelector, p.Spec.Containers[0].Resources.Limits)] = true
		}
		// The pods are not alike as objects: each has a hostname of its own.
		if len(hostnames) != len(pods.Items) {
			t.Errorf("%s: hostnames %v, want one per pod (the controllers give each its own)", app, slices.Collect(maps.Keys(hostnames)))
		}
		if len(rewrites) != 1 {
			t.Errorf("%s: %d different rewrites of one template's pods, want one:\n%s", app, len(rewrites), strings.Join(slices.Sorted(maps.Keys(rewrites)), "\n"))
		}
	}
	after := memoLookups(t)
	// Other work can only add lookups; 7 pods of two templates take at
	// least 5 hits.
	if hits := after["hit"] - before["hit"]; hits < 5 {
		t.Errorf("decision memo: %v hits and %v misses for 4 indexed-Job pods and 3 StatefulSet pods, want at least 5 hits (one miss per workload)",
			hits, after["miss"]-before["miss"])
	}
}

// memoLookups reads gpuadmit_decision_memo_lookups_total by result from the
// webhook's registry in this process.
func memoLookups(t *testing.T) map[string]float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "gpuadmit_decision_memo_lookups_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}
