package claim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

var podsWaiting = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "gpuadmit_claim_pods_waiting_for_template",
	Help: "Pods whose gpuadmit share template could not be created, so their claim cannot be made.",
})

func init() { metrics.Registry.MustRegister(podsWaiting) }

// gcAfter is how old an unreferenced template must be before it is deleted:
// a pod admitted a moment ago may not be in the cache yet.
const gcAfter = time.Minute

// Reconciler keeps, in each namespace, exactly the share templates that the
// namespace's live pods name: it creates a missing one (the webhook names
// templates and creates nothing) and deletes one no live pod references.
type Reconciler struct {
	client client.Client
	events events.EventRecorder
	clock  clock.PassiveClock

	mu      sync.Mutex
	waiting map[string]int // namespace → pods whose template is missing
}

// NewReconciler returns a reconciler writing with c; a nil clock is the real one.
func NewReconciler(c client.Client, ev events.EventRecorder, clk clock.PassiveClock) *Reconciler {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Reconciler{client: c, events: ev, clock: clk, waiting: map[string]int{}}
}

// SetupWithManager watches the pods that hold gpuadmit share claims and the
// templates gpuadmit owns, by namespace.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	owned := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[ManagedBy] == managedValue })
	sharing := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[LabelShare] == "true" })
	return ctrl.NewControllerManagedBy(mgr).
		Named("gpuadmit-claim-templates").
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true)}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(namespaceOf), builder.WithPredicates(sharing)).
		Watches(&resourceapi.ResourceClaimTemplate{}, handler.EnqueueRequestsFromMapFunc(namespaceOf), builder.WithPredicates(owned)).
		Complete(r)
}

func namespaceOf(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}}
}

// Reconcile brings one namespace's templates in step with its pods.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ns := req.Name
	wanted, err := r.wanted(ctx, ns)
	if err != nil {
		return reconcile.Result{}, err
	}
	have := &resourceapi.ResourceClaimTemplateList{}
	if err := r.client.List(ctx, have, client.InNamespace(ns), client.MatchingLabels{ManagedBy: managedValue}); err != nil {
		return reconcile.Result{}, fmt.Errorf("list templates in %s: %w", ns, err)
	}
	existing := map[string]bool{}
	var requeue time.Duration
	for i := range have.Items {
		t := &have.Items[i]
		existing[t.Name] = true
		if _, used := wanted[t.Name]; used {
			continue
		}
		if age := r.clock.Since(t.CreationTimestamp.Time); age < gcAfter {
			requeue = max(requeue, gcAfter-age)
			continue
		}
		if err := r.client.Delete(ctx, t); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("delete template %s/%s: %w", ns, t.Name, err)
		}
	}
	return reconcile.Result{RequeueAfter: requeue}, r.create(ctx, ns, wanted, existing)
}

// wanted maps each template name live pods of ns reference to those pods.
func (r *Reconciler) wanted(ctx context.Context, ns string) (map[string][]*corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := r.client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{LabelShare: "true"}); err != nil {
		return nil, fmt.Errorf("list pods in %s: %w", ns, err)
	}
	out := map[string][]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue // its claim is done with
		}
		for _, c := range p.Spec.ResourceClaims {
			if c.ResourceClaimTemplateName != nil && IsTemplateName(*c.ResourceClaimTemplateName) {
				out[*c.ResourceClaimTemplateName] = append(out[*c.ResourceClaimTemplateName], p)
			}
		}
	}
	return out, nil
}

// create makes each wanted template that does not exist; a pod whose
// template cannot be made gets an Event and counts as waiting.
func (r *Reconciler) create(ctx context.Context, ns string, wanted map[string][]*corev1.Pod, existing map[string]bool) error {
	waiting := 0
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(wanted)) {
		if existing[name] {
			continue
		}
		err := r.createOne(ctx, ns, name, wanted[name])
		if err == nil {
			logf.FromContext(ctx).Info("Share template created", "namespace", ns, "template", name)
			continue
		}
		waiting += len(wanted[name])
		errs = append(errs, err)
		for _, p := range wanted[name] {
			r.events.Eventf(p, nil, corev1.EventTypeWarning, "ClaimTemplateMissing", "CreateTemplate",
				"gpuadmit cannot create the ResourceClaimTemplate %s this pod's GPU memory share needs: %v", name, err)
		}
	}
	r.setWaiting(ns, waiting)
	if len(errs) > 0 {
		return fmt.Errorf("namespace %s: %d share templates not created, first: %w", ns, len(errs), errs[0])
	}
	return nil
}

// createOne makes the template name that pods name: a share's from its
// name, an alternatives template from the pods' AnnotationAlternatives.
func (r *Reconciler) createOne(ctx context.Context, ns, name string, pods []*corev1.Pod) error {
	t, err := templateFor(ns, name, pods)
	if err != nil {
		return err
	}
	err = r.client.Create(ctx, t)
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func (r *Reconciler) setWaiting(ns string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n == 0 {
		delete(r.waiting, ns)
	} else {
		r.waiting[ns] = n
	}
	total := 0
	for _, v := range r.waiting {
		total += v
	}
	podsWaiting.Set(float64(total))
}

// templateFor is the template name stands for: a share's, whose size its
// name says, or an alternatives template, whose alternatives the first pod
// naming it that records them under that exact name says.
func templateFor(ns, name string, pods []*corev1.Pod) (*resourceapi.ResourceClaimTemplate, error) {
	if mib, ok := ShareOf(name); ok {
		return Template(ns, mib), nil
	}
	if IsAlternativesName(name) {
		for _, p := range pods {
			if alts, ok := AlternativesOf(p.Annotations[AnnotationAlternatives], name); ok {
				return AlternativesTemplate(ns, alts), nil
			}
		}
		return nil, fmt.Errorf("no pod that names %s records its alternatives (annotation %s)", name, AnnotationAlternatives)
	}
	return nil, fmt.Errorf("%s is not a template name this version of gpuadmit writes", name)
}
