package handover

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/gpuadmit/gpuadmit/pkg/mutate"
)

// ReasonReplaced is the Event reason on a pod the Reconciler deleted.
const ReasonReplaced = "SchedulerGone"

// Tick bounds how long a pool in Releasing waits between two looks when
// no pod or Lease event comes: with the Lease's own expiry (looked at when
// it falls due), it is the bound docs/scheduler.md states on top of the lease
// duration.
const Tick = time.Second

// Reconciler keeps the record (Owners, in the ConfigMap ConfigMapName) in
// step with gpuadmit-scheduler's Lease and replaces the pods that wait for
// a gpuadmit-scheduler that is gone. It runs on the controller's leader
// only: one writer. There is one object to reconcile, whatever the event.
type Reconciler struct {
	client    client.Client
	lease     *Lease
	events    events.EventRecorder
	namespace string
	clk       clock.PassiveClock
	wake      chan event.TypedGenericEvent[*corev1.ConfigMap]
}

// NewReconciler returns a Reconciler of the record in namespace (where
// gpuadmit-scheduler's Lease is). c reads pods labelled
// gpuadmit.io/managed and the ConfigMap from the cache.
func NewReconciler(c client.Client, lease *Lease, ev events.EventRecorder, namespace string, clk clock.PassiveClock) *Reconciler {
	return &Reconciler{client: c, lease: lease, events: ev, namespace: namespace, clk: clk,
		wake: make(chan event.TypedGenericEvent[*corev1.ConfigMap], 1)}
}

// LeaseChanged makes the Reconciler look again (the Lease handler's onChange).
func (r *Reconciler) LeaseChanged() {
	select {
	case r.wake <- event.TypedGenericEvent[*corev1.ConfigMap]{Object: r.key()}:
	default: // a look is already due
	}
}

func (r *Reconciler) key() *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: ConfigMapName}}
}

// SetupWithManager watches gpuadmit's pods, the record, and the Lease
// (through LeaseChanged, so that the Lease's handler has seen the change
// before the Reconciler looks).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: r.namespace, Name: ConfigMapName}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("gpuadmit-scheduler-handover").
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true)}).
		Watches(&corev1.Pod{}, one).
		Watches(&corev1.ConfigMap{}, one).
		WatchesRawSource(source.Channel(r.wake, &handler.TypedEnqueueRequestForObject[*corev1.ConfigMap]{})).
		Complete(r)
}

// Reconcile writes the next record, then deletes the pods it no longer
// lets wait: the record first, so that the pods their controllers create
// again are admitted under it.
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	log := logf.FromContext(ctx)
	cm, cur, valid, err := r.current(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	waiting, err := r.waiting(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	until, live := r.lease.Expiry()
	next, del := Next(cur, live, waiting)
	if cm == nil || !valid || !next.Equal(cur) {
		if err := r.write(ctx, cm, next); err != nil {
			return reconcile.Result{}, err
		}
		log.Info("gpuadmit-scheduler's pools", "live", live, "was", cur.String(), "now", next.String())
	}
	for _, w := range del {
		if err := r.replace(ctx, w); err != nil {
			return reconcile.Result{}, err
		}
	}
	return r.again(live, until, next, len(del) > 0), nil
}

// again schedules the next look: when the Lease expires, else while a
// pool is still Releasing or pods were just deleted, after Tick.
func (r *Reconciler) again(live bool, until time.Time, next Owners, deleted bool) reconcile.Result {
	if live {
		return reconcile.Result{RequeueAfter: until.Sub(r.clk.Now()) + 10*time.Millisecond}
	}
	for _, s := range next.Pools {
		if s == Releasing {
			return reconcile.Result{RequeueAfter: Tick}
		}
	}
	if deleted {
		return reconcile.Result{RequeueAfter: Tick}
	}
	return reconcile.Result{}
}

// current reads the record; a record that does not parse (valid false)
// counts as none, every pool Stock, and is written again.
func (r *Reconciler) current(ctx context.Context) (cm *corev1.ConfigMap, cur Owners, valid bool, err error) {
	cm = &corev1.ConfigMap{}
	err = r.client.Get(ctx, client.ObjectKeyFromObject(r.key()), cm)
	if apierrors.IsNotFound(err) {
		return nil, Owners{}, true, nil
	}
	if err != nil {
		return nil, Owners{}, false, fmt.Errorf("read %s/%s: %w", r.namespace, ConfigMapName, err)
	}
	if cur, err = Parse(cm.Data); err != nil {
		logf.FromContext(ctx).Error(err, "the record does not parse; writing it again from the pods that wait")
		return cm, Owners{}, false, nil
	}
	return cm, cur, true, nil
}

func (r *Reconciler) waiting(ctx context.Context) ([]Waiting, error) {
	pods := &corev1.PodList{}
	if err := r.client.List(ctx, pods, client.MatchingLabels{mutate.LabelManaged: "true"}); err != nil {
		return nil, fmt.Errorf("list gpuadmit's pods: %w", err)
	}
	var out []Waiting
	for i := range pods.Items {
		if w, ok := WaitingOf(&pods.Items[i]); ok {
			out = append(out, w)
		}
	}
	return out, nil
}

func (r *Reconciler) write(ctx context.Context, cm *corev1.ConfigMap, next Owners) error {
	if cm == nil {
		cm = r.key()
		cm.Labels = map[string]string{"app.kubernetes.io/managed-by": "gpuadmit"}
		cm.Data = next.Data()
		if err := r.client.Create(ctx, cm); err != nil {
			return fmt.Errorf("create %s/%s: %w", r.namespace, ConfigMapName, err)
		}
		return nil
	}
	cm = cm.DeepCopy()
	cm.Data = next.Data()
	if err := r.client.Update(ctx, cm); err != nil {
		return fmt.Errorf("update %s/%s: %w", r.namespace, ConfigMapName, err)
	}
	return nil
}

// replace deletes a waiting pod of a gone gpuadmit-scheduler, by UID, so
// that a pod its controller already created again under the same name
// (StatefulSet) is never the one deleted, and says why on the pod.
func (r *Reconciler) replace(ctx context.Context, w Waiting) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Name, UID: w.UID}}
	err := r.client.Delete(ctx, pod, client.Preconditions{UID: &w.UID})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone already, or replaced by a pod of the same name
	}
	if err != nil {
		return fmt.Errorf("delete pod %s/%s, waiting for %s on pool %s: %w", w.Namespace, w.Name, SchedulerName, strings.Join(w.Pools, ", "), err)
	}
	r.events.Eventf(pod, nil, corev1.EventTypeNormal, ReasonReplaced, "Delete",
		"%s, for which the pod waited on pool %s, holds no live Lease (or no longer owns the pool); deleted so that its controller creates it again for the pool's scheduler now",
		SchedulerName, strings.Join(w.Pools, ", "))
	logf.FromContext(ctx).Info("replaced a pod that waited for gpuadmit-scheduler", "pod", types.NamespacedName{Namespace: w.Namespace, Name: w.Name}, "pools", w.Pools)
	return nil
}
