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

	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

// TestControllerPodsShareOneDecision: the pods that the real job,
// StatefulSet and DaemonSet controllers create from one template differ in
// their names, index labels and annotations, spec.hostname (an indexed
// Job's pods and a StatefulSet's are each given one of their own) and node
// affinity (a DaemonSet's, to the node each is for). None of that is what
// the policies read, so gpuadmit's decision memo answers every pod of a
// workload but the first, and every pod gets the same rewrite.
//
// The memo starts over on any node or policy change; one that lands while
// the pods are admitted (an earlier test's cleanup) costs a hit, so a short
// count is tried again with new workloads, up to three times. A view that
// holds what differs between the pods misses on every pod, every time.
func TestControllerPodsShareOneDecision(t *testing.T) {
	var last string
	for attempt := range 3 {
		got := controllerPodsOnce(t, attempt)
		if t.Failed() {
			return
		}
		// At most one miss per workload: its first pod.
		var short []string
		for _, w := range got {
			if w.hits < float64(w.pods-1) {
				short = append(short, fmt.Sprintf("%s: %v hits and %v misses for %d pods", w.app, w.hits, w.misses, w.pods))
			}
		}
		if len(short) == 0 {
			return
		}
		last = strings.Join(short, "; ")
		t.Logf("attempt %d: %s; again, with new workloads", attempt, last)
	}
	t.Errorf("decision memo, in each of three attempts: %s; want every pod of a workload but the first to hit", last)
}

// memoCount is what the decision memo answered while one workload's pods
// were created.
type memoCount struct {
	app          string
	pods         int
	hits, misses float64
}

// controllerPodsOnce creates an indexed Job of 4 pods, then a StatefulSet
// of 3, then a DaemonSet on the 2 nodes of pool h100-inference, each after
// the last's pods exist (the job controller creates its pods in slow-start
// batches, the first alone), checks their pods, removes everything, and
// returns the memo's hits and misses for each workload's pods.
func controllerPodsOnce(t *testing.T, attempt int) []memoCount {
	ctx := context.Background()
	const ns = "team-a"
	// A request no other test, and no earlier attempt, makes: a pod the
	// memo answered before would hit on its first pod.
	prefix := fmt.Sprintf("memo%d", attempt)
	limits := corev1.ResourceList{"gpuadmit.io/gpu-memory": mustQuantity(fmt.Sprintf("%dMi", 3333+attempt))}
	template := func(app string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app, "gpuadmit.io/class": "inference"}},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{Limits: limits}}},
			},
		}
	}
	jobApp, stsApp, dsApp := prefix+"-indexed", prefix+"-sts", prefix+"-ds"
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
	// The DaemonSet controller adds the same tolerations to every pod, and
	// to each affinity to its own node by name; the template's nodeSelector
	// picks the pool's nodes, and its toleration their taints.
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: dsApp}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": dsApp}},
		Template: template(dsApp),
	}}
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"gpuadmit.io/pool": "h100-inference"}
	ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	defer func() {
		// Foreground: the owners stay until their pods are gone, so no
		// controller makes new ones meanwhile.
		for _, w := range []client.Object{job, sts, ds} {
			_ = env.Client.Delete(ctx, w, client.PropagationPolicy(metav1.DeletePropagationForeground))
		}
		for _, app := range []string{jobApp, stsApp, dsApp} {
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
	var out []memoCount
	for _, w := range []struct {
		obj  client.Object
		app  string
		pods int
	}{{job, jobApp, 4}, {sts, stsApp, 3}, {ds, dsApp, 2}} {
		before := memoLookups(t)
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
		hostnames, affinities := map[string]bool{}, map[string]bool{}
		rewrites := map[string]bool{}
		for _, p := range pods.Items {
			hostnames[p.Spec.Hostname] = true
			affinities[p.Spec.Affinity.String()] = true
			if p.Annotations[record.AnnotationDecision] == "" {
				t.Errorf("%s: pod %s was not rewritten: annotations %v", w.app, p.Name, p.Annotations)
			}
			rewrites[fmt.Sprintf("%s; nodeSelector %v; limits %v", p.Annotations[record.AnnotationDecision], p.Spec.NodeSelector, p.Spec.Containers[0].Resources.Limits)] = true
		}
		// The pods are not alike as objects: each has a hostname of its
		// own, or (a DaemonSet's) affinity to a node of its own.
		if w.obj == ds {
			if len(affinities) != len(pods.Items) {
				t.Errorf("%s: affinities %v, want one per pod (the controller gives each its node)", w.app, slices.Collect(maps.Keys(affinities)))
			}
		} else if len(hostnames) != len(pods.Items) {
			t.Errorf("%s: hostnames %v, want one per pod (the controllers give each its own)", w.app, slices.Collect(maps.Keys(hostnames)))
		}
		if len(rewrites) != 1 {
			t.Errorf("%s: %d different rewrites of one template's pods, want one:\n%s", w.app, len(rewrites), strings.Join(slices.Sorted(maps.Keys(rewrites)), "\n"))
		}
		after := memoLookups(t)
		out = append(out, memoCount{app: w.app, pods: w.pods, hits: after["hit"] - before["hit"], misses: after["miss"] - before["miss"]})
	}
	return out
}

// memoLookups is gpuadmit_decision_memo_lookups_total by result (hit,
// miss) in this process.
func memoLookups(t *testing.T) map[string]float64 {
	return counters(t, "gpuadmit_decision_memo_lookups_total", "result")
}
