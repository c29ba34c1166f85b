package quota

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// The ResourceQuota gpuadmit owns in each governed namespace.
const (
	Name          = "gpuadmit"
	ManagedBy     = "app.kubernetes.io/managed-by"
	managedValue  = "gpuadmit"
	RevisionLabel = "gpuadmit.io/policy-revision"
)

// Declarations returns the active policy set's quota declarations and its
// revision; an empty revision means no set is active yet.
type Declarations interface {
	Quotas() ([]Declaration, string)
}

// Reconciler keeps the ResourceQuota named gpuadmit in every namespace in
// step with the declarations: created where a declaration governs the
// namespace, updated (with a drift Event when someone edited it), deleted
// where none does. It never touches ResourceQuotas it does not own.
type Reconciler struct {
	client client.Client
	decls  Declarations
	events events.EventRecorder
}

// NewReconciler returns a reconciler writing with c.
func NewReconciler(c client.Client, decls Declarations, ev events.EventRecorder) *Reconciler {
	return &Reconciler{client: c, decls: decls, events: ev}
}

// SetupWithManager watches namespaces, owned ResourceQuotas, and trigger (a
// new policy revision: the caller sends one event per namespace).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, trigger <-chan event.TypedGenericEvent[*corev1.Namespace]) error {
	owned := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[ManagedBy] == managedValue })
	return ctrl.NewControllerManagedBy(mgr).
		Named("gpuadmit-quota").
		// A process may run the webhook more than once (the end-to-end tests
		// stop and restart it); the name is still unique per manager.
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true)}).
		For(&corev1.Namespace{}).
		Watches(&corev1.ResourceQuota{}, handler.EnqueueRequestsFromMapFunc(namespaceOf), builder.WithPredicates(owned)).
		WatchesRawSource(source.Channel(trigger, &handler.TypedEnqueueRequestForObject[*corev1.Namespace]{})).
		Complete(r)
}

func namespaceOf(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}}
}

// Reconcile brings one namespace's quota in step. Before a policy set is
// active (no revision: the first load has not finished, or every set so far
// failed) there are no declarations to read, which is not the same as
// declarations that govern nothing: it changes nothing, and the revision's
// arrival resyncs every namespace.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	decls, rev := r.decls.Quotas()
	if rev == "" {
		logf.FromContext(ctx).V(2).Info("no active policy set; quota left as it is", "namespace", req.Name)
		return reconcile.Result{}, nil
	}
	ns := &corev1.Namespace{}
	if err := r.client.Get(ctx, req.NamespacedName, ns); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if ns.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	d, governed := For(decls, ns)
	have := &corev1.ResourceQuota{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: Name}, have)
	switch {
	case apierrors.IsNotFound(err) && governed:
		return reconcile.Result{}, r.client.Create(ctx, desired(ns.Name, d, rev))
	case apierrors.IsNotFound(err):
		return reconcile.Result{}, nil
	case err != nil:
		return reconcile.Result{}, err
	case have.Labels[ManagedBy] != managedValue:
		r.events.Eventf(have, nil, corev1.EventTypeWarning, "QuotaNotOwned", "Reconcile", "ResourceQuota %s/%s exists and is not gpuadmit's; gpuadmit leaves it alone", ns.Name, Name)
		return reconcile.Result{}, nil
	case !governed:
		return reconcile.Result{}, client.IgnoreNotFound(r.client.Delete(ctx, have))
	}
	return reconcile.Result{}, r.update(ctx, have, desired(ns.Name, d, rev))
}

// update writes the declared hard limits; a difference under the same
// revision means someone edited gpuadmit's quota by hand: say so.
func (r *Reconciler) update(ctx context.Context, have, want *corev1.ResourceQuota) error {
	if equality.Semantic.DeepEqual(have.Spec.Hard, want.Spec.Hard) && have.Labels[RevisionLabel] == want.Labels[RevisionLabel] {
		return nil
	}
	if have.Labels[RevisionLabel] == want.Labels[RevisionLabel] {
		r.events.Eventf(have, nil, corev1.EventTypeWarning, "QuotaDrift", "Reconcile",
			"ResourceQuota %s/%s was changed outside Git; restored to policy revision %s", have.Namespace, have.Name, want.Labels[RevisionLabel])
	}
	have.Spec.Hard, have.Labels = want.Spec.Hard, want.Labels
	if err := r.client.Update(ctx, have); err != nil {
		return fmt.Errorf("update ResourceQuota %s/%s: %w", have.Namespace, have.Name, err)
	}
	logf.FromContext(ctx).Info("quota updated", "namespace", have.Namespace, "revision", want.Labels[RevisionLabel])
	return nil
}

func desired(ns string, d Declaration, rev string) *corev1.ResourceQuota {
	q := &corev1.ResourceQuota{}
	q.Namespace, q.Name = ns, Name
	q.Labels = map[string]string{ManagedBy: managedValue, RevisionLabel: rev}
	q.Spec.Hard = d.Hard()
	return q
}
