package write

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/intent"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// AnnotationScheduler records what gpuadmit changed about a pod's scheduler:
// the spec.schedulerName it arrived with and the annotations of that
// scheduler it removed, so that the pod as its author wrote it can be
// rebuilt when it comes back (RestoreScheduler).
const AnnotationScheduler = "gpuadmit.io/scheduler"

// defaultScheduler is the name the API server writes into every pod that names no scheduler.
const defaultScheduler = corev1.DefaultSchedulerName

// schedulerRecord is AnnotationScheduler's value.
type schedulerRecord struct {
	SchedulerName string            `json:"schedulerName,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// SetScheduler gives the admitted pod owner, the scheduler that owns its
// pool (or, for a pod placed by alternatives, all of its pools; where names
// them): a pod taken over from a foreign scheduler (d.MigrateFrom) always,
// losing the annotations only that scheduler reads; a pod that names no
// scheduler only where the owner is not the default one. A pod that keeps
// its own scheduler was only offered pools that scheduler may use. It
// returns what the explanation adds, and, for a pod taken over, the
// warning that says so.
func SetScheduler(pod *corev1.Pod, d policy.Decision, owner, where string) (note, warning string, err error) {
	if owner == "" {
		owner = defaultScheduler
	}
	asked := pod.Spec.SchedulerName
	unset := asked == "" || asked == defaultScheduler
	if d.MigrateFrom == "" && (!unset || owner == defaultScheduler) {
		return "", "", nil
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
		return "", "", fmt.Errorf("encode %s: %w", AnnotationScheduler, err)
	}
	pod.Annotations[AnnotationScheduler] = string(raw)
	pod.Spec.SchedulerName = owner
	if d.MigrateFrom == "" {
		verb := "is"
		if strings.HasPrefix(where, "pools ") {
			verb = "are"
		}
		return fmt.Sprintf(" %s %s scheduled by %s, which the pod now names in spec.schedulerName.", capitalized(where), verb, owner), "", nil
	}
	msg := fmt.Sprintf("spec.schedulerName %q is replaced by %q, which schedules %s", asked, owner, where)
	if len(removed) > 0 {
		msg += fmt.Sprintf("; the annotations only %s reads, read into the request first, are removed: %s", d.MigrateFrom, strings.Join(removed, ", "))
	}
	return " " + msg + ".", msg, nil
}

// RestoreScheduler undoes SetScheduler on a pod that comes back, from its
// AnnotationScheduler record.
func RestoreScheduler(pod *corev1.Pod) error {
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

// capitalized is s with its first letter upper-case ("pool a" → "Pool a").
func capitalized(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
