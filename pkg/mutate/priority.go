package mutate

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/utils/clock"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gpuadmit/gpuadmit/pkg/mutate/decide"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

// PriorityClassGetter finds a PriorityClass by name. found is false when the
// class does not exist.
type PriorityClassGetter interface {
	PriorityClass(ctx context.Context, name string) (pc *schedulingv1.PriorityClass, found bool, err error)
}

// MutatorOptions are a Mutator's optional settings; the zero value works.
type MutatorOptions struct {
	// PriorityClasses resolves the PriorityClass a decision sets, so that the
	// patch carries spec.priority and spec.preemptionPolicy exactly as the API
	// server's Priority plugin would compute them. The plugin runs again after
	// a webhook changes the pod and then finds nothing to change, so the API
	// server does not call gpuadmit a second time (reinvocationPolicy
	// IfNeeded). Nil (the offline CLI) leaves both unset for the plugin to
	// fill, which costs that second call.
	//
	// It also tells the cluster's global default class (globalDefault: true)
	// from a class the pod's author chose: the Priority plugin writes the
	// default into every pod that names none before any webhook runs, so the
	// policy sees it as unset (see withoutClusterDefault). With nil, a pod
	// carrying the default is taken as its author's choice.
	PriorityClasses PriorityClassGetter

	// RecordKeys seal gpuadmit's record with a MAC (record.AnnotationMAC) over
	// every value it wrote, when it wrote them and, in a workload's pod
	// template, that workload. A pod that comes back within SealWindow
	// (reinvocation after a later webhook), and a pod of the live workload
	// whose template carries the seal, pass unchanged when its values are
	// still in place, even if the nodes or the policy changed meanwhile;
	// any other pod is decided again. Nil, or no current key (the offline
	// CLI), seals nothing: a pod that comes back is verified by deciding
	// again, which denies it when the decision changed.
	RecordKeys record.KeySource
	// Schedulers lists the second schedulers running now, for
	// input.cluster.schedulers; nil lists none (the stock scheduler only).
	Schedulers SchedulerSource
	// SealWindow is how long a pod's own seal is taken as it stands: the
	// reinvocation window, in which the API server may send the pod it
	// admitted back to gpuadmit within the same request. Past it (a saved
	// pod applied again, a record copied onto a new pod) the pod is
	// decided again. The API server bounds a request by its
	// --request-timeout (60s by default), so the window must be longer
	// than that, plus the clock skew between gpuadmit's replicas. Zero
	// means DefaultSealWindow.
	SealWindow time.Duration
	// Clock tells the time of sealing and of checking a seal; nil means the real clock.
	Clock clock.PassiveClock
	// Workloads reads the live workload that owns a pod arriving with its
	// template's seal (see Mutator.verify); nil reads none, so such pods
	// are decided again.
	Workloads WorkloadReader
	// Capacity, when set, makes pool choice look at free capacity: a pool
	// is taken only if, after what pods bound, nominated or admitted to it
	// hold, one node the pod may run on and the pool as a whole still have
	// room for it; otherwise the policy's next candidate is tried. Nil (the
	// offline CLI) checks the nodes' allocatable only, as if the cluster
	// were empty, and the explanation says so.
	Capacity decide.Capacity
	// NoAlternatives places every pod on one pool, DRA pools included, as
	// the webhook did before DRA alternatives: the first candidate, in the
	// policy's order, that fits and has room (see Capacity), pinned by that
	// pool's nodeSelector and per-model accounting resource. It is for
	// clusters whose API server or scheduler lacks the prioritized list of
	// DRA requests (firstAvailable, feature gate DRAPrioritizedList), where
	// a claim with alternatives is refused or never allocated. False (the
	// default) gives a pod whose candidates span several DRA pools of one
	// scheduler one claim per GPU container with the candidates as
	// alternatives, and lets the scheduler choose the pool.
	NoAlternatives bool
	// Demand, with Capacity, makes the pick of one pool (every pod placed
	// on one pool: device-plugin and extended-resource pools, and all pools
	// under NoAlternatives) take, among the candidate pools with room, the
	// one whose model is of least price: the GPU that pods only some models
	// can serve are expected to need there, over its free GPU (see decide.Room).
	// Where no cached pod is pinned so, every price is 0 and the pick is
	// the policy's order. Nil takes the first pool with room in the
	// policy's order.
	Demand decide.Demand
}

// resolvePriority fills spec.priority and spec.preemptionPolicy from the
// PriorityClass that the writer named (write.Apply). When the class cannot be read they
// stay unset: the Priority plugin resolves the name itself (and refuses a
// class that does not exist), so nothing is lost but the second call.
func (m *Mutator) resolvePriority(ctx context.Context, pod *corev1.Pod) {
	name := pod.Spec.PriorityClassName
	if m.opts.PriorityClasses == nil || name == "" || pod.Spec.Priority != nil {
		return
	}
	pc, found, err := m.opts.PriorityClasses.PriorityClass(ctx, name)
	if err != nil || !found {
		logf.FromContext(ctx).V(1).Info("PriorityClass not resolved; the API server resolves it", "priorityClass", name, "error", err)
		return
	}
	value := pc.Value
	policy := corev1.PreemptLowerPriority // the API server's default for a class
	if pc.PreemptionPolicy != nil {
		policy = *pc.PreemptionPolicy
	}
	pod.Spec.Priority, pod.Spec.PreemptionPolicy = &value, &policy
}

// withoutClusterDefault returns the pod as the policy should see it: when
// spec.priorityClassName names the cluster's global default class, the API
// server's Priority plugin most likely put it there (it fills the default
// into every pod that names no class, before mutating webhooks run), so the
// name, spec.priority and spec.preemptionPolicy are cleared and a class the
// policy maps replaces them instead of conflicting with them.
//
// A pod whose author wrote the default class's name explicitly looks exactly
// the same by then; it is treated the same way, as asking for no particular
// class, so a gpuadmit class on such a pod wins. The arriving pod is not
// changed; when the policy sets no class, the default stays.
func (m *Mutator) withoutClusterDefault(ctx context.Context, pod *corev1.Pod) *corev1.Pod {
	name := pod.Spec.PriorityClassName
	if m.opts.PriorityClasses == nil || name == "" {
		return pod
	}
	pc, found, err := m.opts.PriorityClasses.PriorityClass(ctx, name)
	if err != nil || !found || !pc.GlobalDefault {
		return pod
	}
	logf.FromContext(ctx).V(2).Info("the cluster's default PriorityClass counts as unset", "priorityClass", name)
	out := *pod // the policy only reads it; a shallow copy is enough
	out.Spec.PriorityClassName, out.Spec.Priority, out.Spec.PreemptionPolicy = "", nil, nil
	return &out
}
