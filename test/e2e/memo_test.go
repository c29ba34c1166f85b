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

	"github.com/gpuadmit/gpuadmit/pkg/mutate"
)

// TestControllerPodsShareOneDecision: the pods that the real job and
// StatefulSet controllers create from one template differ in their names,
// index labels and annotations, and spec.hostname (an indexed Job's pods and
// a StatefulSet's are each given one of their own). None of that is what the
// policies read, so gpuadmit's decision memo answers every pod of a workload
// but the first, and every pod gets the same rewrite.
//
// The memo starts over on any node or policy change; one that lands while
// the pods are admitted (an earlier test's cleanup) costs a hit, so a short
// count is tried again with new workloads, up to three times. A view that
// holds what differs between the pods misses on every pod, every time.
func TestControllerPodsShareOneDecision(t *testing.T) {
	var last string
	for attempt := range 3 {
		hits, misses := controllerPodsOnce(t, fmt.Sprintf("memo%d", attempt))
		if t.Failed() {
			return
		}
		// 7 pods of two templates: at most one miss per template.
		if hits >= 5 {
			return
		}
		last = fmt.Sprintf("%v hits and %v misses", hits, misses)
		t.Logf("attempt %d: %s; again, with new workloads", attempt, last)
	}
	t.Errorf("decision memo: %s for 4 indexed-Job pods and 3 StatefulSet pods in each of three attempts, want at least 5 hits (one miss per workload)", last)
}

// controllerPodsOnce creates an indexed Job of 4 pods, then a StatefulSet
// of 3, each after the last's pods exist (the job controller creates its
// pods in slow-start batches, the first alone), checks their pods, removes
// everything, and returns the memo's hits and misses meanwhile.
func controllerPodsOnce(t *testing.T, prefix string) (hits, misses float64) {
	ctx := context.Background()
	const ns = "team-a"
	// A request no other test makes.
	limits := corev1.ResourceList{"gpuadmit.io/gpu-memory": mustQuantity("3333Mi")}
	template := func(app string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app, "gpuadmit.io/class": "inference"}},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{Limits: limits}}},
			},
		}
	}
	jobApp, stsApp := prefix+"-indexed", prefix+"-sts"
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: jobApp}, Spec: batchv1.JobSpec{
		CompletionMode: ptr.To(batchv1.IndexedCompletion), Completions: ptr.To[int32](4), Parallelism: ptr.To[int32](4),
		Template: template(jobApp),
	}}
	job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: stsApp}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To[int32](3), ServiceName: stsApp, PodManagementPolicy: appsv1.ParallelPodManagement,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": stsApp}},
		Template: template(stsApp),
	}}
	defer func() {
		// Foreground: the owners stay until their pods are gone, so no
		// controller makes new ones meanwhile.
		for _, w := range []client.Object{job, sts} {
			_ = env.Client.Delete(ctx, w, client.PropagationPolicy(metav1.DeletePropagationForeground))
		}
		for _, app := range []string{jobApp, stsApp} {
			_ = env.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.MatchingLabels{"app": app}, client.GracePeriodSeconds(0))
			waitFor(t, "the pods of "+app+" are gone", 60*time.Second, func() (bool, string) {
				var pods corev1.PodList
				if err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": app}); err != nil {
					return false, err.Error()
				}
				return len(pods.Items) == 0, fmt.Sprintf("%d left", len(pods.Items))
			})
		}
	}()
	before := memoLookups(t)
	for _, w := range []struct {
		obj  client.Object
		app  string
		pods int
	}{{job, jobApp, 4}, {sts, stsApp, 3}} {
		if err := env.Client.Create(ctx, w.obj); err != nil {
			t.Fatalf("step create %T: %v", w.obj, err)
		}
		var pods corev1.PodList
		waitFor(t, fmt.Sprintf("%d pods of %s", w.pods, w.app), 60*time.Second, func() (bool, string) {
			if err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": w.app}); err != nil {
				return false, err.Error()
			}
			return len(pods.Items) >= w.pods, fmt.Sprintf("%d pods", len(pods.Items))
		})
		hostnames := map[string]bool{}
		rewrites := map[string]bool{}
		for _, p := range pods.Items {
			hostnames[p.Spec.Hostname] = true
			if p.Annotations[mutate.AnnotationDecision] == "" {
				t.Errorf("%s: pod %s was not rewritten: annotations %v", w.app, p.Name, p.Annotations)
			}
			rewrites[fmt.Sprintf("%s; nodeSelector %v; limits %v", p.Annotations[mutate.AnnotationDecision], p.Spec.NodeSelector, p.Spec.Containers[0].Resources.Limits)] = true
		}
		// The pods are not alike as objects: each has a hostname of its own.
		if len(hostnames) != len(pods.Items) {
			t.Errorf("%s: hostnames %v, want one per pod (the controllers give each its own)", w.app, slices.Collect(maps.Keys(hostnames)))
		}
		if len(rewrites) != 1 {
			t.Errorf("%s: %d different rewrites of one template's pods, want one:\n%s", w.app, len(rewrites), strings.Join(slices.Sorted(maps.Keys(rewrites)), "\n"))
		}
	}
	after := memoLookups(t)
	return after["hit"] - before["hit"], after["miss"] - before["miss"]
}

// memoLookups is gpuadmit_decision_memo_lookups_total by result (hit,
// miss) in this process.
func memoLookups(t *testing.T) map[string]float64 {
	return counters(t, "gpuadmit_decision_memo_lookups_total", "result")
}
