package decide

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/claim"
	"github.com/gpuadmit/gpuadmit/pkg/intent"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// Alternatives: on DRA pools the webhook decides what a pod may get and the
// scheduler decides where. A pod whose policy candidates fit on more than
// one DRA pool is pinned to none: each GPU container gets a claim whose one
// request lists the candidates as firstAvailable alternatives, in the
// policy's order (pkg/claim), and requests only gpuadmit.io/gpu-memory-mib,
// at its largest alternative's MiB, for quotas.
//
// Rules, each for a reason:
//   - The first candidate of the pod's first GPU container that fits (by
//     size, on a pool the pod's own node constraints allow) decides: on a
//     DRA pool the pod gets alternatives, else it is placed as before,
//     since a device-plugin pool's resource name is fixed at admission.
//   - Alternatives are the fitting candidates on DRA pools of the first
//     one's scheduler (pkg/poolowner's record, which the policy reads): a
//     pod waits for one scheduler only. Candidates on other pools are left
//     out and named in the explanation.
//     The record names every pool of the alternatives (poolowner.PoolsOf):
//     gpuadmit's handover (pkg/handover) counts the pod as waiting on each,
//     and replaces it should gpuadmit-scheduler lose any of them, and
//     gpuadmit-scheduler's plugin refuses it unless it owns them all.
//   - An alternative selects its devices by model, not by pool: where a DRA
//     pool the alternatives do not name has the model and form of one of
//     them (an operator's named pools splitting a model, one for another
//     team), the pod is placed on one pool as before, so that it never
//     lands on a pool the policy did not offer it.
//   - Only app containers take alternatives: a pod whose init containers
//     (sidecars included) ask for GPU is placed on one pool as before, where
//     the writer shares an init container's claim with the app's.
//   - A per-model quota that has no room left for an alternative drops it.
//     Such pods do not request the per-model resource (it would pin them),
//     so a per-model quota counts only pods placed on one pool: it is
//     approximate for pods with alternatives.
//   - Containers of one pod have a claim each; the scheduler allocates all
//     of a pod's claims on the one node it binds the pod to. They may get
//     different forms there (a MIG slice and a share), and different
//     models only on a node whose GPUs are of several models.

// AltOption is one alternative of a container: a candidate that fits on a DRA pool.
type AltOption struct {
	Pool       *inventory.Pool
	Assignment Assignment
}

// Alternative is the option as its claim's subrequest is made.
func (o AltOption) Alternative() claim.Alternative {
	a := o.Assignment
	switch a.Cand.Backend {
	case policy.BackendMIG:
		return claim.Alternative{Backend: claim.BackendMIG, Model: o.Pool.Model, Profile: a.Profile, Count: a.Quantity}
	case policy.BackendShared:
		return claim.Alternative{Backend: claim.BackendShared, Model: o.Pool.Model, MiB: a.ClaimMiB}
	}
	return claim.Alternative{Backend: claim.BackendWhole, Model: o.Pool.Model, Count: a.Quantity}
}

// AltContainer is a GPU container and what it accepts, in order.
type AltContainer struct {
	Req  intent.Request
	Opts []AltOption
}

// ChargeMiB is what quotas charge the container: its largest alternative.
func (c AltContainer) ChargeMiB() int64 {
	var most int64
	for _, o := range c.Opts {
		most = max(most, o.Assignment.GivenMiB)
	}
	return most
}

// Resources are what the container requests: its charge, in the
// accounting resource only.
func (c AltContainer) Resources() corev1.ResourceList {
	return resourceList(map[string]int64{inventory.ResourceMemoryMiB: c.ChargeMiB()})
}

// Alternatives are the container's options as its claim lists them.
func (c AltContainer) Alternatives() []claim.Alternative {
	out := make([]claim.Alternative, len(c.Opts))
	for i, o := range c.Opts {
		out[i] = o.Alternative()
	}
	return out
}

// AltChoice is a pod placed by alternatives.
type AltChoice struct {
	Containers []AltContainer
	// Owner is the scheduler of every pool the alternatives are on ("" is
	// the default scheduler).
	Owner string
	// Left says, candidate by candidate, why one that fits was left out.
	Left []string
	// Also are the pools of candidates that repeat an alternative (the
	// same form of the same model), whose devices it selects too.
	Also []AltOption
}

// Pools are the pools the alternatives may be allocated on, in order of
// first mention.
func (ch *AltChoice) Pools() []*inventory.Pool {
	var out []*inventory.Pool
	for _, c := range ch.Containers {
		for _, o := range c.Opts {
			if !slices.Contains(out, o.Pool) {
				out = append(out, o.Pool)
			}
		}
	}
	for _, o := range ch.Also {
		if !slices.Contains(out, o.Pool) {
			out = append(out, o.Pool)
		}
	}
	return out
}

// PoolNames are the names of Pools.
func (ch *AltChoice) PoolNames() []string {
	pools := ch.Pools()
	names := make([]string, len(pools))
	for i, p := range pools {
		names[i] = p.Name
	}
	return names
}

// Candidates are every alternative's candidate, container by container,
// then those that repeat one (Also): the pod may land on any of their pools.
func (ch *AltChoice) Candidates() []policy.Candidate {
	var out []policy.Candidate
	for _, c := range ch.Containers {
		for _, o := range c.Opts {
			out = append(out, o.Assignment.Cand)
		}
	}
	for _, o := range ch.Also {
		out = append(out, o.Assignment.Cand)
	}
	return out
}

// ChooseAlternatives returns the pod's alternatives, or nil where it is
// placed on one pool as before (see the rules above).
func ChooseAlternatives(pod *corev1.Pod, want intent.Pod, d policy.Decision, inv *inventory.Inventory, quota *corev1.ResourceQuota) *AltChoice {
	for _, r := range want.Requests {
		if r.Kind != intent.App {
			return nil
		}
	}
	ch := &AltChoice{}
	decided := false
	for _, r := range want.Requests {
		c := AltContainer{Req: r}
		for _, cand := range d.Placement[r.Container] {
			pool, a, ok := fitsStatically(pod, r, cand, inv)
			if !ok {
				continue
			}
			if !decided {
				if !pool.DRA {
					return nil
				}
				decided, ch.Owner = true, cand.SchedulerName
			}
			if alt := (AltOption{Pool: pool, Assignment: a}).Alternative(); pool.DRA && slices.ContainsFunc(c.Opts, func(o AltOption) bool { return o.Alternative() == alt }) {
				// The same alternative on another pool of the model (or
				// named twice): its devices are already selected.
				ch.Also = append(ch.Also, AltOption{Pool: pool, Assignment: a})
				continue
			}
			if why := ch.leaveOut(c, pool, a, quota); why != "" {
				ch.Left = append(ch.Left, fmt.Sprintf("container %q, %s candidate on pool %s: %s", r.Container, cand.Backend, pool.Name, why))
				continue
			}
			c.Opts = append(c.Opts, AltOption{Pool: pool, Assignment: a})
		}
		if len(c.Opts) == 0 {
			return nil
		}
		ch.Containers = append(ch.Containers, c)
	}
	if len(ch.Pools()) < 2 || ch.reachesOtherPools(pod, inv) {
		return nil
	}
	return ch
}

// reachesOtherPools reports whether an alternative's devices could be
// allocated on a DRA pool the alternatives do not name: one of the same
// model that serves the same form (an operator's named pools splitting a
// model, a pool another scheduler owns), and on whose nodes the pod's own
// constraints let it run. An alternative selects by model, which cannot
// tell such pools apart, so the pod is then placed on one pool as before.
func (ch *AltChoice) reachesOtherPools(pod *corev1.Pod, inv *inventory.Inventory) bool {
	offered := ch.Pools()
	for _, c := range ch.Containers {
		for _, o := range c.Opts {
			for _, p := range inv.Pools {
				if !p.DRA || p.Model != o.Pool.Model || !servesBackend(p, o.Assignment.Cand.Backend) || slices.Contains(offered, p) {
					continue
				}
				if _, why := eligibleNodes(pod, p); why == "" {
					return true
				}
			}
		}
	}
	return false
}

// fitsStatically fits the candidate on its pool by size alone, on a pool
// where some node the pod's own constraints allow advertises the
// accounting resource the pod will request.
func fitsStatically(pod *corev1.Pod, r intent.Request, cand policy.Candidate, inv *inventory.Inventory) (*inventory.Pool, Assignment, bool) {
	pool, ok := inv.Pool(cand.Pool)
	if !ok {
		return nil, Assignment{}, false
	}
	a, err := fit(r, cand, pool)
	if err != nil {
		return nil, Assignment{}, false
	}
	nodes, why := eligibleNodes(pod, pool)
	if why != "" || !slices.ContainsFunc(nodes, func(n inventory.Node) bool { return n.Allocatable[inventory.ResourceMemoryMiB] > 0 }) {
		return nil, Assignment{}, false
	}
	return pool, a, true
}

// leaveOut says why a fitting candidate is not one of c's alternatives, or "".
func (ch *AltChoice) leaveOut(c AltContainer, pool *inventory.Pool, a Assignment, quota *corev1.ResourceQuota) string {
	switch {
	case !pool.DRA:
		return "not a DRA pool: a device plugin's resource name would be fixed at admission, which pins the pod to one pool"
	case a.Cand.SchedulerName != ch.Owner:
		return fmt.Sprintf("scheduled by %s, and the pod's other alternatives by %s: a pod waits for one scheduler", SchedulerOrDefault(a.Cand.SchedulerName), SchedulerOrDefault(ch.Owner))
	case len(c.Opts) == claim.MaxAlternatives:
		return fmt.Sprintf("beyond the %d alternatives a claim request may list", claim.MaxAlternatives)
	}
	if left, ok := QuotaLeft(quota, pool.ModelResource); ok && left < a.GivenMiB {
		return fmt.Sprintf("the namespace's quota on %s has %d MiB left, less than the %d MiB it gives", pool.ModelResource, left, a.GivenMiB)
	}
	return ""
}

// SchedulerOrDefault is the scheduler name, or the default scheduler's for "".
func SchedulerOrDefault(name string) string {
	if name == "" {
		return corev1.DefaultSchedulerName
	}
	return name
}

// QuotaLeft is what the namespace's gpuadmit ResourceQuota leaves of
// resource's requests, as its status says; ok is false where it sets none.
func QuotaLeft(q *corev1.ResourceQuota, resource string) (int64, bool) {
	if q == nil {
		return 0, false
	}
	name := corev1.ResourceName("requests." + resource)
	hard, ok := q.Status.Hard[name]
	if !ok {
		return 0, false
	}
	used := q.Status.Used[name]
	return hard.Value() - used.Value(), true
}
