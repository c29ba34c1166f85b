package claim

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

type eventLog struct{ reasons []string }

func (e *eventLog) Eventf(regarding runtime.Object, _ runtime.Object, _, reason, _, _ string, _ ...any) {
	e.reasons = append(e.reasons, reason+" "+regarding.(*corev1.Pod).Name)
}

func sharePod(name string, phase corev1.PodPhase, templates ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", Labels: map[string]string{LabelShare: "true"}}}
	for i, t := range templates {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: PodClaimPrefix + string(rune('a'+i)), ResourceClaimTemplateName: ptr.To(t)})
	}
	p.Status.Phase = phase
	return p
}

func aged(t *resourceapi.ResourceClaimTemplate, created time.Time) *resourceapi.ResourceClaimTemplate {
	t.CreationTimestamp = metav1.NewTime(created)
	return t
}

func TestReconcilerKeepsExactlyTheTemplatesLivePodsName(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		sharePod("running", corev1.PodRunning, TemplateName(10240)),
		sharePod("pending", corev1.PodPending, TemplateName(10240), TemplateName(20480)),
		sharePod("done", corev1.PodSucceeded, TemplateName(4096)),
		sharePod("forged", corev1.PodPending, "gpuadmit-share-512mi-0000000000"),
		aged(Template("team-a", 4096), now.Add(-2*gcAfter)),  // only a finished pod names it: deleted
		aged(Template("team-a", 8192), now.Add(-gcAfter/2)),  // young, unreferenced: kept for now
		aged(Template("team-a", 20480), now.Add(-2*gcAfter)), // referenced: kept
	).Build()
	ev := &eventLog{}
	r := NewReconciler(c, ev, clocktesting.NewFakePassiveClock(now))

	res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "team-a"}})
	if err == nil {
		t.Error("Reconcile hid that a template could not be created")
	}
	if res.RequeueAfter != gcAfter/2 {
		t.Errorf("RequeueAfter = %s, want %s (when the young template may go)", res.RequeueAfter, gcAfter/2)
	}
	list := &resourceapi.ResourceClaimTemplateList{}
	if err := c.List(context.Background(), list, client.InNamespace("team-a")); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tmpl := range list.Items {
		got = append(got, tmpl.Name)
	}
	want := []string{TemplateName(10240), TemplateName(20480), TemplateName(8192)}
	if diff := cmp.Diff(want, got, cmpSorted); diff != "" {
		t.Errorf("templates (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"ClaimTemplateMissing forged"}, ev.reasons); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

var cmpSorted = cmpopts.SortSlices(func(a, b string) bool { return a < b })
