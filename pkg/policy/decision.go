package policy

import (
	"bytes"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Backends a candidate may name.
const (
	BackendMIG    = "mig"
	BackendShared = "shared"
	BackendWhole  = "whole"
	// BackendTimeSliced gives replicas of a time-sliced GPU: neither a
	// whole GPU nor an isolated share of its memory.
	BackendTimeSliced = "time-sliced"
)

// Candidate is one place a container may go; a placement lists them in order.
type Candidate struct {
	// Pool names an inventory pool.
	Pool string `json:"pool"`
	// Backend is mig, shared, whole or time-sliced.
	Backend string `json:"backend"`
	// Profile pins a MIG profile; empty lets gpuadmit take the smallest that fits.
	Profile string `json:"profile,omitempty"`
	// Rule names the policy rule that offered the candidate, for explanations.
	Rule string `json:"rule,omitempty"`
	// Tolerations are added when this candidate is taken.
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// SchedulerName is the scheduler that owns the pool; empty means
	// default-scheduler. A pod taken over from another scheduler
	// (Decision.MigrateFrom), or one that names none, gets it.
	SchedulerName string `json:"schedulerName,omitempty"`
}

// Decision is data.gpuadmit.decision, decoded and shape-checked.
type Decision struct {
	Deny []string `json:"deny"`
	// Pass leaves the pod as it arrived, with Warnings: its own scheduler
	// (spec.schedulerName) coexists with gpuadmit and decides for it.
	Pass bool `json:"pass"`
	// MigrateFrom names the foreign scheduler the pod was written for and
	// gpuadmit takes it over from: the pod gets its pool's scheduler and
	// loses the annotations only MigrateFrom reads. Empty otherwise.
	MigrateFrom       string                 `json:"migrateFrom"`
	Warnings          []string               `json:"warnings"`
	Placement         map[string][]Candidate `json:"placement"`
	PriorityClassName string                 `json:"priorityClassName"`
	NodeSelector      map[string]string      `json:"nodeSelector"`
	Tolerations       []corev1.Toleration    `json:"tolerations"`
	Labels            map[string]string      `json:"labels"`
	Annotations       map[string]string      `json:"annotations"`
	// Revision is the policy revision that made the decision.
	Revision string `json:"-"`
}

// decode turns the query's value into a Decision, refusing unknown fields and
// values gpuadmit could not apply.
func decode(v any) (Decision, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return Decision{}, fmt.Errorf("encode %s: %w", DecisionQuery, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var d Decision
	if err := dec.Decode(&d); err != nil {
		return Decision{}, fmt.Errorf("%s has an unexpected shape: %w", DecisionQuery, err)
	}
	if errs := d.validate(); len(errs) > 0 {
		return Decision{}, fmt.Errorf("%s cannot be applied: %w", DecisionQuery, errs.ToAggregate())
	}
	return d, nil
}

func (d Decision) validate() field.ErrorList {
	root := field.NewPath("decision")
	var errs field.ErrorList
	for name, cands := range d.Placement {
		for i, c := range cands {
			errs = append(errs, c.validate(root.Child("placement").Key(name).Index(i))...)
		}
	}
	if d.PriorityClassName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(d.PriorityClassName) {
			errs = append(errs, field.Invalid(root.Child("priorityClassName"), d.PriorityClassName, msg))
		}
	}
	errs = append(errs, validateLabels(root.Child("nodeSelector"), d.NodeSelector)...)
	errs = append(errs, validateLabels(root.Child("labels"), d.Labels)...)
	errs = append(errs, validateTolerations(root.Child("tolerations"), d.Tolerations)...)
	for k := range d.Annotations {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(root.Child("annotations").Key(k), k, msg))
		}
	}
	return errs
}

func (c Candidate) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	rule := ""
	if c.Rule != "" {
		rule = " (rule " + c.Rule + ")"
	}
	if c.Pool == "" {
		errs = append(errs, field.Required(p.Child("pool"), "a candidate names a pool"+rule))
	}
	switch c.Backend {
	case BackendMIG, BackendShared, BackendWhole, BackendTimeSliced:
	default:
		errs = append(errs, field.NotSupported(p.Child("backend"), c.Backend+rule, []string{BackendMIG, BackendShared, BackendWhole, BackendTimeSliced}))
	}
	if c.Profile != "" && c.Backend != BackendMIG {
		errs = append(errs, field.Invalid(p.Child("profile"), c.Profile, "only a mig candidate names a profile"+rule))
	}
	if c.SchedulerName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(c.SchedulerName) {
			errs = append(errs, field.Invalid(p.Child("schedulerName"), c.SchedulerName, msg+rule))
		}
	}
	return append(errs, validateTolerations(p.Child("tolerations"), c.Tolerations)...)
}

func validateLabels(p *field.Path, m map[string]string) field.ErrorList {
	var errs field.ErrorList
	for k, v := range m {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(p.Key(k), k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(p.Key(k), v, msg))
		}
	}
	return errs
}

func validateTolerations(p *field.Path, ts []corev1.Toleration) field.ErrorList {
	var errs field.ErrorList
	for i, t := range ts {
		switch t.Operator {
		case corev1.TolerationOpEqual, corev1.TolerationOpExists, "":
		default:
			errs = append(errs, field.NotSupported(p.Index(i).Child("operator"), t.Operator, []string{"Equal", "Exists"}))
		}
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute, corev1.TaintEffectPreferNoSchedule, "":
		default:
			errs = append(errs, field.NotSupported(p.Index(i).Child("effect"), t.Effect, []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}))
		}
		if t.Operator == corev1.TolerationOpExists && t.Value != "" {
			errs = append(errs, field.Invalid(p.Index(i).Child("value"), t.Value, "must be empty with operator Exists"))
		}
		if t.Key == "" && t.Operator != corev1.TolerationOpExists {
			errs = append(errs, field.Invalid(p.Index(i).Child("key"), t.Key, "an empty key needs operator Exists"))
		}
	}
	return errs
}
