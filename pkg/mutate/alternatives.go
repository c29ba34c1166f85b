package mutate

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
//     addClaims shares an init container's claim with the app's.
//   - A per-model quota that has no room left for an alternative drops it.
//     Such pods do not request the per-model resource (it would pin them),
//     so a per-model quota counts only pods placed on one pool: it is
//     approximate for pods with alternatives.
//   - Containers of one pod have a claim each; the scheduler allocates all
//     of a pod's claims on the one node it binds the pod to. They may get
//     different forms there (a MIG slice and a share), and different
//     models only on a node whose GPUs are of several models.

// altOption is one alternative of a container: a candidate that fits on a DRA pool.
type altOption struct {
	pool *inventory.Pool
	a    assignment
}

// alternative is the option as its claim's subrequest is made.
func (o altOption) alternative() claim.Alternative {
	switch o.a.cand.Backend {
	case policy.BackendMIG:
		return claim.Alternative{Backend: claim.BackendMIG, Model: o.pool.Model, Profile: o.a.profile, Count: o.a.quantity}
	case policy.BackendShared:
		return claim.Alternative{Backend: claim.BackendShared, Model: o.pool.Model, MiB: o.a.claimMiB}
	}
	return claim.Alternative{Backend: claim.BackendWhole, Model: o.pool.Model, Count: o.a.quantity}
}

// describe says what the option gives: "1 MIG 1g.10gb slice of an H100-80GB
// (9984 MiB) on pool h100".
func (o altOption) describe() string {
	alt := o.alternative()
	switch alt.Backend {
	case claim.BackendMIG:
		return fmt.Sprintf("%d MIG %s slice(s) of an %s (%d MiB) on pool %s", alt.Count, alt.Profile, alt.Model, o.a.givenMiB, o.pool.Name)
	case claim.BackendShared:
		return fmt.Sprintf("a share of %d MiB of one %s on pool %s", alt.MiB, alt.Model, o.pool.Name)
	}
	return fmt.Sprintf("%d whole %s GPU(s) (%d MiB) on pool %s", alt.Count, alt.Model, o.a.givenMiB, o.pool.Name)
}

// altContainer is a GPU container and what it accepts, in order.
type altContainer struct {
	req  intent.Request
	opts []altOption
}

// chargeMiB is what quotas charge the container: its largest alternative.
func (c altContainer) chargeMiB() int64 {
	var most int64
	for _, o := range c.opts {
		most = max(most, o.a.givenMiB)
	}
	return most
}

func (c altContainer) alternatives() []claim.Alternative {
	out := make([]claim.Alternative, len(c.opts))
	for i, o := range c.opts {
		out[i] = o.alternative()
	}
	return out
}

// altChoice is a pod placed by alternatives.
type altChoice struct {
	containers []altContainer
	// owner is the scheduler of every pool the alternatives are on ("" is
	// the default scheduler).
	owner string
	// left says, candidate by candidate, why one that fits was left out.
	left []string
	// also are the pools of candidates that repeat an alternative (the
	// same form of the same model), whose devices it selects too.
	also []altOption
}

// pools are the pools the alternatives may be allocated on, in order of
// first mention.
func (ch *altChoice) pools() []*inventory.Pool {
	var out []*inventory.Pool
	for _, c := range ch.containers {
		for _, o := range c.opts {
			if !slices.Contains(out, o.pool) {
				out = append(out, o.pool)
			}
		}
	}
	for _, o := range ch.also {
		if !slices.Contains(out, o.pool) {
			out = append(out, o.pool)
		}
	}
	return out
}

// tolerations are those of every alternative's candidate (repeated ones
// too: the pod may land on their pools), then the policy's own.
func (ch *altChoice) tolerations(d policy.Decision) []corev1.Toleration {
	var ts []corev1.Toleration
	for _, c := range ch.containers {
		for _, o := range c.opts {
			ts = append(ts, o.a.cand.Tolerations...)
		}
	}
	for _, o := range ch.also {
		ts = append(ts, o.a.cand.Tolerations...)
	}
	return append(ts, d.Tolerations...)
}

// chooseAlternatives returns the pod's alternatives, or nil where it is
// placed on one pool as before (see the rules above).
func chooseAlternatives(pod *corev1.Pod, want intent.Pod, d policy.Decision, inv *inventory.Inventory, quota *corev1.ResourceQuota) *altChoice {
	for _, r := range want.Requests {
		if r.Kind != intent.App {
			return nil
		}
	}
	ch := &altChoice{}
	decided := false
	for _, r := range want.Requests {
		c := altContainer{req: r}
		for _, cand := range d.Placement[r.Container] {
			pool, a, ok := fitsStatically(pod, r, cand, inv)
			if !ok {
				continue
			}
			if !decided {
				if !pool.DRA {
					return nil
				}
				decided, ch.owner = true, cand.SchedulerName
			}
			if alt := (altOption{pool: pool, a: a}).alternative(); pool.DRA && slices.ContainsFunc(c.opts, func(o altOption) bool { return o.alternative() == alt }) {
				// The same alternative on another pool of the model (or
				// named twice): its devices are already selected.
				ch.also = append(ch.also, altOption{pool: pool, a: a})
				continue
			}
			if why := ch.leaveOut(c, pool, a, quota); why != "" {
				ch.left = append(ch.left, fmt.Sprintf("container %q, %s candidate on pool %s: %s", r.Container, cand.Backend, pool.Name, why))
				continue
			}
			c.opts = append(c.opts, altOption{pool: pool, a: a})
		}
		if len(c.opts) == 0 {
			return nil
		}
		ch.containers = append(ch.containers, c)
	}
	if len(ch.pools()) < 2 || ch.reachesOtherPools(pod, inv) {
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
func (ch *altChoice) reachesOtherPools(pod *corev1.Pod, inv *inventory.Inventory) bool {
	offered := ch.pools()
	for _, c := range ch.containers {
		for _, o := range c.opts {
			for _, p := range inv.Pools {
				if !p.DRA || p.Model != o.pool.Model || !servesBackend(p, o.a.cand.Backend) || slices.Contains(offered, p) {
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
func fitsStatically(pod *corev1.Pod, r intent.Request, cand policy.Candidate, inv *inventory.Inventory) (*inventory.Pool, assignment, bool) {
	pool, ok := inv.Pool(cand.Pool)
	if !ok {
		return nil, assignment{}, false
	}
	a, err := fit(r, cand, pool)
	if err != nil {
		return nil, assignment{}, false
	}
	nodes, why := eligibleNodes(pod, pool)
	if why != "" || !slices.ContainsFunc(nodes, func(n inventory.Node) bool { return n.Allocatable[inventory.ResourceMemoryMiB] > 0 }) {
		return nil, assignment{}, false
	}
	return pool, a, true
}

// leaveOut says why a fitting candidate is not one of c's alternatives, or "".
func (ch *altChoice) leaveOut(c altContainer, pool *inventory.Pool, a assignment, quota *corev1.ResourceQuota) string {
	switch {
	case !pool.DRA:
		return "not a DRA pool: a device plugin's resource name would be fixed at admission, which pins the pod to one pool"
	case a.cand.SchedulerName != ch.owner:
		return fmt.Sprintf("scheduled by %s, and the pod's other alternatives by %s: a pod waits for one scheduler", schedulerOrDefault(a.cand.SchedulerName), schedulerOrDefault(ch.owner))
	case len(c.opts) == claim.MaxAlternatives:
		return fmt.Sprintf("beyond the %d alternatives a claim request may list", claim.MaxAlternatives)
	}
	if left, ok := quotaLeft(quota, pool.ModelResource); ok && left < a.givenMiB {
		return fmt.Sprintf("the namespace's quota on %s has %d MiB left, less than the %d MiB it gives", pool.ModelResource, left, a.givenMiB)
	}
	return ""
}

func schedulerOrDefault(name string) string {
	if name == "" {
		return defaultScheduler
	}
	return name
}

// quotaLeft is what the namespace's gpuadmit ResourceQuota leaves of
// resource's requests, as its status says; ok is false where it sets none.
func quotaLeft(q *corev1.ResourceQuota, resource string) (int64, bool) {
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
