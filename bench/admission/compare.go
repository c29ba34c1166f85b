package admission

import (
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"

	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// Mutation is what a GPU webhook changed in a pod, in a form two webhooks'
// answers can be compared by: gpuadmit's and OPA's must agree on all of it
// (the decision annotations' wording may differ, their keys may not).
type Mutation struct {
	NodeSelector      map[string]string `json:"nodeSelector"`
	Tolerations       []string          `json:"tolerations"`
	PriorityClassName string            `json:"priorityClassName"`
	Priority          string            `json:"priority"`    // spec.priority/spec.preemptionPolicy, "" when unset
	Limits            []string          `json:"limits"`      // per container, "name=quantity" joined by ","
	Requests          []string          `json:"requests"`    // likewise
	Annotations       []string          `json:"annotations"` // gpuadmit.io/ keys
}

// MutationOf reads a created (or dry-run) pod's mutation.
func MutationOf(p *corev1.Pod) Mutation {
	m := Mutation{NodeSelector: p.Spec.NodeSelector, PriorityClassName: p.Spec.PriorityClassName}
	if p.Spec.Priority != nil {
		m.Priority = fmt.Sprintf("%d/%s", *p.Spec.Priority, ptr.Deref(p.Spec.PreemptionPolicy, ""))
	}
	for _, t := range p.Spec.Tolerations {
		m.Tolerations = append(m.Tolerations, fmt.Sprintf("%s %s %s:%s", t.Key, t.Operator, t.Value, t.Effect))
	}
	slices.Sort(m.Tolerations)
	for _, c := range p.Spec.Containers {
		m.Limits = append(m.Limits, resourceString(c.Resources.Limits))
		m.Requests = append(m.Requests, resourceString(c.Resources.Requests))
	}
	for k := range p.Annotations {
		// The seal (an HMAC over what gpuadmit wrote) is gpuadmit's alone:
		// the OPA policy has no key to sign with, and nothing to compare.
		if strings.HasPrefix(k, "gpuadmit.io/") && k != record.AnnotationMAC && k != record.AnnotationWritten {
			m.Annotations = append(m.Annotations, k)
		}
	}
	slices.Sort(m.Annotations)
	return m
}

func resourceString(l corev1.ResourceList) string {
	parts := make([]string, 0, len(l))
	for _, k := range slices.Sorted(maps.Keys(l)) {
		q := l[k]
		parts = append(parts, fmt.Sprintf("%s=%s", k, q.String()))
	}
	return strings.Join(parts, ",")
}

// Diff says how two mutations differ, "" when they agree.
func (m Mutation) Diff(other Mutation) string {
	var out []string
	a, b := reflect.ValueOf(m), reflect.ValueOf(other)
	for i := range a.NumField() {
		x, y := a.Field(i).Interface(), b.Field(i).Interface()
		if !reflect.DeepEqual(x, y) && !(isEmpty(a.Field(i)) && isEmpty(b.Field(i))) {
			out = append(out, fmt.Sprintf("%s: %v vs %v", a.Type().Field(i).Name, x, y))
		}
	}
	return strings.Join(out, "; ")
}

func isEmpty(v reflect.Value) bool {
	return v.IsZero() || (v.Kind() == reflect.Map || v.Kind() == reflect.Slice) && v.Len() == 0
}
