package decide

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// GPUAdmitScheduler is gpuadmit-scheduler's name (deploy/scheduler).
const GPUAdmitScheduler = "gpuadmit-scheduler"

// PoolReleasing is a pool's state in gpuadmit's record of
// gpuadmit-scheduler's pools (pkg/handover) while the pods that waited there
// for a gpuadmit-scheduler whose Lease expired are being replaced: the
// webhook admits no pod to the pool until then, so that no pod of the stock
// scheduler ever waits beside them.
const PoolReleasing = "releasing"

// PoolOwners says which pools gpuadmit-scheduler may own.
type PoolOwners interface {
	// PoolOwner is the pool's state in gpuadmit's record of
	// gpuadmit-scheduler's pools: GPUAdmitScheduler, "default-scheduler"
	// or PoolReleasing.
	PoolOwner(pool string) string
}

// GateSchedulers drops the candidates the pod may not take whatever the
// policy says, and says why: every candidate on a pool being released (its
// pending pods of a gone gpuadmit-scheduler are being replaced), and, for a
// pod no controller owns, every candidate that would give it
// gpuadmit-scheduler. Should gpuadmit-scheduler go away, gpuadmit replaces
// the pods that wait for it by deleting them for their controllers to
// create again; nothing would create a bare pod again, so it would wait
// for good (spec.schedulerName cannot change). A workload's pod template
// (template, the Kueue path) is not bare: its pods will have the workload
// as their controller. owners may be nil (no pool is released). d is not
// modified (the memo holds it).
func GateSchedulers(pod *corev1.Pod, d policy.Decision, template bool, owners PoolOwners) (policy.Decision, []string) {
	bare := !template && metav1.GetControllerOf(pod) == nil
	var reasons []string
	seen := map[string]bool{}
	why := func(c policy.Candidate) string {
		if owners != nil && owners.PoolOwner(c.Pool) == PoolReleasing {
			return fmt.Sprintf("pool %s: %s's Lease expired and the pods that waited for it there are being replaced; the pool takes pods again once they are (seconds), so a controller's next try is admitted", c.Pool, GPUAdmitScheduler)
		}
		if bare && c.SchedulerName == GPUAdmitScheduler {
			return fmt.Sprintf("pool %s: it is scheduled by %s, which gpuadmit gives only pods a controller (Deployment, Job, StatefulSet…) creates again, so that they are replaced should %s go away; create the pod through one", c.Pool, GPUAdmitScheduler, GPUAdmitScheduler)
		}
		return ""
	}
	out := make(map[string][]policy.Candidate, len(d.Placement))
	changed := false
	for _, name := range slices.Sorted(maps.Keys(d.Placement)) {
		cands := d.Placement[name]
		kept := make([]policy.Candidate, 0, len(cands))
		for _, c := range cands {
			w := why(c)
			if w == "" {
				kept = append(kept, c)
				continue
			}
			changed = true
			if !seen[w] {
				seen[w] = true
				reasons = append(reasons, w)
			}
		}
		out[name] = kept
	}
	if changed {
		d.Placement = out
	}
	return d, reasons
}
