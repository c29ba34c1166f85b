package mutate

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuadmit/gpuadmit/pkg/intent"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// AnnotationScheduler records what gpuadmit changed about a pod's scheduler:
// the spec.schedulerName it arrived with and the annotations of that
// scheduler it removed, so that the pod as its author wrote it can be
// rebuilt when it comes back (unmutate).
const AnnotationScheduler = "gpuadmit.io/scheduler"

// GPUAdmitScheduler is gpuadmit-scheduler's name (deploy/scheduler).
const GPUAdmitScheduler = "gpuadmit-scheduler"

// PoolReleasing is a pool's state in gpuadmit's record of
// gpuadmit-scheduler's pools (pkg/handover) while the pods that waited there
// for a gpuadmit-scheduler whose Lease expired are being replaced: the
// webhook admits no pod to the pool until then, so that no pod of the stock
// scheduler ever waits beside them.
const PoolReleasing = "releasing"

// defaultScheduler is the name the API server writes into every pod that names no scheduler.
const defaultScheduler = corev1.DefaultSchedulerName

// schedulerRecord is AnnotationScheduler's value.
type schedulerRecord struct {
	SchedulerName string            `json:"schedulerName,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// passed is the result for a pod whose own scheduler coexists with gpuadmit:
// the pod as it arrived, with the policy's warnings.
func passed(pod *corev1.Pod, d policy.Decision) Result {
	return Result{Allowed: true, Pod: pod.DeepCopy(), Warnings: d.Warnings, Revision: d.Revision,
		Explanation: fmt.Sprintf("spec.schedulerName %q decides for this pod: policy revision %s leaves that scheduler's pods to it, so gpuadmit changed nothing.",
			pod.Spec.SchedulerName, d.Revision)}
}

// setScheduler gives the admitted pod owner, the scheduler that owns its
// pool (or, for a pod placed by alternatives, all of its pools; where names
// them): a pod taken over from a foreign scheduler (d.MigrateFrom) always,
// losing the annotations only that scheduler reads; a pod that names no
// scheduler only where the owner is not the default one. A pod that keeps
// its own scheduler was only offered pools that scheduler may use.
func setScheduler(res *Result, d policy.Decision, owner, where string) error {
	pod := res.Pod
	if owner == "" {
		owner = defaultScheduler
	}
	asked := pod.Spec.SchedulerName
	unset := asked == "" || asked == defaultScheduler
	if d.MigrateFrom == "" && (!unset || owner == defaultScheduler) {
		return nil
	}
	rec := schedulerRecord{SchedulerName: asked}
	removed := intent.SchedulerAnnotations(d.MigrateFrom, pod.Annotations)
	for _, k := range removed {
		if rec.Annotations == nil {
			rec.Annotations = map[string]string{}
		}
		rec.Annotations[k] = pod.Annotations[k]
		delete(pod.Annotations, k)
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode %s: %w", AnnotationScheduler, err)
	}
	pod.Annotations[AnnotationScheduler] = string(raw)
	pod.Spec.SchedulerName = owner
	if d.MigrateFrom == "" {
		verb := "is"
		if strings.HasPrefix(where, "pools ") {
			verb = "are"
		}
		res.Explanation += fmt.Sprintf(" %s %s scheduled by %s, which the pod now names in spec.schedulerName.", capitalized(where), verb, owner)
		return nil
	}
	msg := fmt.Sprintf("spec.schedulerName %q is replaced by %q, which schedules %s", asked, owner, where)
	if len(removed) > 0 {
		msg += fmt.Sprintf("; the annotations only %s reads, read into the request first, are removed: %s", d.MigrateFrom, strings.Join(removed, ", "))
	}
	res.Warnings = append(res.Warnings, msg)
	res.Explanation += " " + msg + "."
	return nil
}

// restoreScheduler undoes setScheduler on a pod that comes back, from its
// AnnotationScheduler record.
func restoreScheduler(pod *corev1.Pod) error {
	raw, ok := pod.Annotations[AnnotationScheduler]
	if !ok {
		return nil
	}
	var rec schedulerRecord
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		return fmt.Errorf("%s is not gpuadmit's record: %w", AnnotationScheduler, err)
	}
	pod.Spec.SchedulerName = rec.SchedulerName
	for k, v := range rec.Annotations {
		pod.Annotations[k] = v
	}
	return nil
}

// poolOwners is input.cluster.owners: each pool's state in the record.
func poolOwners(s SchedulerSource, inv *inventory.Inventory) map[string]string {
	out := make(map[string]string, len(inv.Pools))
	for _, p := range inv.Pools {
		out[p.Name] = s.PoolOwner(p.Name)
	}
	return out
}

// gateSchedulers drops the candidates the pod may not take whatever the
// policy says, and says why: every candidate on a pool being released (its
// pending pods of a gone gpuadmit-scheduler are being replaced), and, for a
// pod no controller owns, every candidate that would give it
// gpuadmit-scheduler. Should gpuadmit-scheduler go away, gpuadmit replaces
// the pods that wait for it by deleting them for their controllers to
// create again; nothing would create a bare pod again, so it would wait
// for good (spec.schedulerName cannot change). A workload's pod template
// (template, the Kueue path) is not bare: its pods will have the workload
// as their controller. d is not modified (the memo holds it).
func (m *Mutator) gateSchedulers(pod *corev1.Pod, d policy.Decision, template bool) (policy.Decision, []string) {
	bare := !template && metav1.GetControllerOf(pod) == nil
	var reasons []string
	seen := map[string]bool{}
	why := func(c policy.Candidate) string {
		if m.opts.Schedulers != nil && m.opts.Schedulers.PoolOwner(c.Pool) == PoolReleasing {
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

// capitalized is s with its first letter upper-case ("pool a" → "Pool a").
func capitalized(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
