package handover

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gpuadmit/gpuadmit/pkg/mutate"
	"github.com/gpuadmit/gpuadmit/pkg/poolowner"
)

func placed(name, pool, scheduler string, controlled bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID("uid-" + name),
		Labels:      map[string]string{mutate.LabelManaged: "true"},
		Annotations: map[string]string{poolowner.AnnotationDecision: "main: 1 whole GPU" + poolowner.PoolMark + pool + poolowner.RevisionMark + "r1"}},
		Spec: corev1.PodSpec{SchedulerName: scheduler}}
	if controlled {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs", Controller: ptr.To(true)}}
	}
	return p
}

// TestReconcilerReleasesAPoolOfAGoneScheduler: with gpuadmit-scheduler's
// Lease gone and the record giving it every pool, one pass writes the pool
// with its waiting pods as releasing, deletes the controlled pod that
// waits for it (not the bare one, not the stock scheduler's) with an Event
// that says why (not a Kueue workload's pod, which would come back for the
// same scheduler), and looks again after Tick; the next pass, the pod gone,
// gives the pool to the stock scheduler and schedules no further look.
func TestReconcilerReleasesAPoolOfAGoneScheduler(t *testing.T) {
	ctx := context.Background()
	rec := (&poolowner.Owners{Others: Owned}).Data()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "gpuadmit-system", Name: ConfigMapName}, Data: rec}
	c := fake.NewClientBuilder().WithObjects(cm,
		placed("replaced", "a100", SchedulerName, true),
		placed("bare", "t4", SchedulerName, false),
		placed("stock", "h100", corev1.DefaultSchedulerName, true),
		kueuePod(placed("kueue", "a100", SchedulerName, true))).Build()
	ev := events.NewFakeRecorder(10)
	r := NewReconciler(c, NewLease(clocktesting.NewFakePassiveClock(time.Now())), ev, "gpuadmit-system", clocktesting.NewFakePassiveClock(time.Now()))

	res, err := r.Reconcile(ctx, reconcile.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != Tick {
		t.Errorf("RequeueAfter = %v while a pool is releasing, want Tick", res.RequeueAfter)
	}
	if got := storedRecord(t, c); !cmp.Equal(got, map[string]string{"other-pools": "default-scheduler", "pool.a100": "releasing"}) {
		t.Errorf("record after the first pass: %v", got)
	}
	left := map[string]bool{}
	for _, name := range []string{"replaced", "bare", "stock", "kueue"} {
		err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: name}, &corev1.Pod{})
		left[name] = !apierrors.IsNotFound(err)
	}
	if diff := cmp.Diff(map[string]bool{"replaced": false, "bare": true, "stock": true, "kueue": true}, left); diff != "" {
		t.Errorf("pods left (-want +got):\n%s", diff)
	}
	select {
	case e := <-ev.Events:
		if !strings.Contains(e, ReasonReplaced) || !strings.Contains(e, "pool a100") {
			t.Errorf("Event %q does not say why on which pool", e)
		}
	default:
		t.Error("no Event on the deleted pod")
	}

	res, err = r.Reconcile(ctx, reconcile.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if got := storedRecord(t, c); !cmp.Equal(got, map[string]string{"other-pools": "default-scheduler"}) {
		t.Errorf("record after the second pass: %v", got)
	}
	if res.RequeueAfter != 0 {
		t.Errorf("RequeueAfter = %v with nothing left to release, want none", res.RequeueAfter)
	}
}

func kueuePod(p *corev1.Pod) *corev1.Pod {
	p.Labels[mutate.LabelKueuePodSet] = "main"
	return p
}

func storedRecord(t *testing.T, c client.Client) map[string]string {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "gpuadmit-system", Name: ConfigMapName}, cm); err != nil {
		t.Fatal(err)
	}
	return cm.Data
}
