package write

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/intent"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/decide"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// Out is a pod as gpuadmit writes it, or why the decision cannot be
// written into it.
type Out struct {
	// Denied, when set, says why the decision cannot be written into the
	// pod (a policy nodeSelector that contradicts the pod's own or the
	// pool's); the rest is then empty.
	Denied string
	// Pod is the pod as gpuadmit admits it.
	Pod *corev1.Pod
	// Written is every value written into Pod, for the seal.
	Written *record.Written
	// Warnings are the policy's and the writer's, for the client.
	Warnings []string
	// Explanation is a paragraph a person can follow: what was asked, what
	// was given and why, and how the pool was checked.
	Explanation string
}

// Apply writes the decision into a copy of the pod, with the warnings of
// what it gives (several MIG slices, time-sliced replicas).
func Apply(pod *corev1.Pod, want intent.Pod, d policy.Decision, ch *decide.Choice) (Out, error) {
	d.Warnings = append(d.Warnings, severalSlicesWarnings(ch)...)
	d.Warnings = append(d.Warnings, timeSlicedWarnings(ch)...)
	out := pod.DeepCopy()
	rec := record.Original{}
	w := &record.Written{Revision: d.Revision, Priority: d.PriorityClassName, NotInNamed: ch.Pool.ExcludeNamed,
		Labels: maps.Clone(d.Labels), Annotations: userMeta(d.Annotations)}
	for _, a := range ch.Assigns {
		c := decide.ContainerOf(out, a.Req)
		rec[c.Name] = record.OriginalGPU(c)
		res := a.Resources(ch.Pool)
		setResources(c, res)
		w.SetResources(c.Name, res)
	}
	addClaims(out, ch.Assigns)
	w.AddClaims(out)
	if msg := addSelectors(out, ch.Pool.NodeSelector, d.NodeSelector); msg != "" {
		return Out{Denied: msg}, nil
	}
	w.NodeSelector = merged(ch.Pool.NodeSelector, d.NodeSelector)
	if ch.Pool.ExcludeNamed {
		ExcludeNamedPools(out)
	}
	w.Tolerations = addTolerations(out, tolerations(ch, d))
	setPriority(out, d.PriorityClassName)
	record.SetMeta(&out.Labels, d.Labels)
	record.SetMeta(&out.Annotations, d.Annotations)
	raw, err := rec.Encode()
	if err != nil {
		return Out{}, err
	}
	record.SetMeta(&out.Annotations, map[string]string{
		record.AnnotationDecision:       decisionText(ch, d.Revision),
		record.AnnotationRequest:        raw,
		record.AnnotationAcceptedModels: ch.Accepted,
	})
	return Out{Pod: out, Written: w, Warnings: d.Warnings, Explanation: explain(pod, want, d, ch)}, nil
}

// setResources replaces every GPU and accounting key of the container with
// the final resources, requests equal to limits, as the API server requires
// of extended resources.
func setResources(c *corev1.Container, res corev1.ResourceList) {
	for _, list := range []*corev1.ResourceList{&c.Resources.Limits, &c.Resources.Requests} {
		for k := range *list {
			if intent.IsGPUResource(k) || inventory.IsAccountingResource(string(k)) {
				delete(*list, k)
			}
		}
		if *list == nil {
			*list = corev1.ResourceList{}
		}
		for r, q := range res {
			(*list)[r] = q
		}
	}
}

// addSelectors pins the pod to the pool and adds the policy's selectors. A
// policy selector that contradicts the pod's own is a denial, not a merge.
func addSelectors(pod *corev1.Pod, pool, policySel map[string]string) string {
	if k, v, clash := decide.SelectorClash(pod.Spec.NodeSelector, policySel); clash {
		return fmt.Sprintf("spec.nodeSelector[%s]=%s conflicts with the policy's %s=%s; remove it from the pod", k, pod.Spec.NodeSelector[k], k, v)
	}
	if k, v, clash := decide.SelectorClash(pool, policySel); clash {
		return fmt.Sprintf("the policy's nodeSelector %s=%s contradicts the chosen pool's %s=%s", k, v, k, pool[k])
	}
	record.SetMeta(&pod.Spec.NodeSelector, pool)
	record.SetMeta(&pod.Spec.NodeSelector, policySel)
	return ""
}

// tolerations are those of the taken candidates, then the policy's own.
func tolerations(ch *decide.Choice, d policy.Decision) []corev1.Toleration {
	var ts []corev1.Toleration
	for _, a := range ch.Assigns {
		ts = append(ts, a.Cand.Tolerations...)
	}
	return append(ts, d.Tolerations...)
}

// addTolerations appends each toleration the pod does not already have,
// and returns them all as written (the operator defaulted).
func addTolerations(pod *corev1.Pod, ts []corev1.Toleration) []corev1.Toleration {
	var out []corev1.Toleration
	for _, t := range ts {
		if t.Operator == "" {
			t.Operator = corev1.TolerationOpEqual
		}
		if !record.HasToleration(pod.Spec.Tolerations, t) {
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, t)
		}
		out = append(out, t)
	}
	return out
}

// setPriority sets the PriorityClass. The API server's Priority plugin ran
// before the webhook and filled spec.priority (and preemptionPolicy) from the
// old class; they are cleared, so that the plugin would not reject the
// mismatch, and the handler fills them from the new class.
func setPriority(pod *corev1.Pod, name string) {
	if name == "" || pod.Spec.PriorityClassName == name {
		return
	}
	pod.Spec.PriorityClassName = name
	pod.Spec.Priority = nil
	pod.Spec.PreemptionPolicy = nil
}

// merged is a's entries overridden by b's; nil when both are empty.
func merged(a, b map[string]string) map[string]string {
	var out map[string]string
	record.SetMeta(&out, a)
	record.SetMeta(&out, b)
	return out
}

// userMeta drops gpuadmit's own annotations, which the MAC covers as they are.
func userMeta(m map[string]string) map[string]string {
	var out map[string]string
	for k, v := range m {
		if !record.IsOwnAnnotation(k) {
			record.SetMeta(&out, map[string]string{k: v})
		}
	}
	return out
}
