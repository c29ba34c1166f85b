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
	"github.com/gpuadmit/gpuadmit/pkg/poolowner"
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
	f := newDraft(pod, d)
	f.w.NotInNamed = ch.Pool.ExcludeNamed
	for _, a := range ch.Assigns {
		f.setResources(a.Req, a.Resources(ch.Pool))
	}
	addClaims(f.pod, ch.Assigns)
	if ch.Pool.ExcludeNamed {
		ExcludeNamedPools(f.pod)
	}
	own := map[string]string{
		record.AnnotationDecision:       decisionText(clauses(ch), poolowner.PoolMark, []string{ch.Pool.Name}, d.Revision),
		record.AnnotationAcceptedModels: ch.Accepted,
	}
	if msg, err := f.finish(d, ch.Pool.NodeSelector, ch.Candidates(), own); msg != "" || err != nil {
		return Out{Denied: msg}, err
	}
	return Out{Pod: f.pod, Written: f.w, Warnings: d.Warnings, Explanation: explain(pod, want, d, ch)}, nil
}

// draft is a pod being written: the copy, the GPU request its author
// wrote (record.Original), and every value written (record.Written).
type draft struct {
	pod *corev1.Pod
	rec record.Original
	w   *record.Written
}

// newDraft starts writing d into a copy of pod.
func newDraft(pod *corev1.Pod, d policy.Decision) *draft {
	return &draft{pod: pod.DeepCopy(), rec: record.Original{}, w: &record.Written{Revision: d.Revision, Priority: d.PriorityClassName,
		Labels: maps.Clone(d.Labels), Annotations: userMeta(d.Annotations)}}
}

// setResources gives the container req was read from res, once its
// author's GPU request is recorded, and returns the container.
func (f *draft) setResources(req intent.Request, res corev1.ResourceList) *corev1.Container {
	c := decide.ContainerOf(f.pod, req)
	f.rec[c.Name] = record.OriginalGPU(c)
	setResources(c, res)
	f.w.SetResources(c.Name, res)
	return c
}

// finish writes what every placement writes once the containers have
// their resources and claims: the pool's and the policy's nodeSelector, the
// tolerations of cands then the policy's, the PriorityClass, the policy's
// labels and annotations, and gpuadmit's record (own, with the author's
// request). It returns why the selectors cannot be written, or "".
func (f *draft) finish(d policy.Decision, poolSel map[string]string, cands []policy.Candidate, own map[string]string) (string, error) {
	f.w.AddClaims(f.pod)
	if msg := addSelectors(f.pod, poolSel, d.NodeSelector); msg != "" {
		return msg, nil
	}
	f.w.NodeSelector = merged(poolSel, d.NodeSelector)
	f.w.Tolerations = addTolerations(f.pod, tolerations(cands, d))
	setPriority(f.pod, d.PriorityClassName)
	record.SetMeta(&f.pod.Labels, d.Labels)
	record.SetMeta(&f.pod.Annotations, d.Annotations)
	raw, err := f.rec.Encode()
	if err != nil {
		return "", err
	}
	own[record.AnnotationRequest] = raw
	record.SetMeta(&f.pod.Annotations, own)
	return "", nil
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
func tolerations(cands []policy.Candidate, d policy.Decision) []corev1.Toleration {
	var ts []corev1.Toleration
	for _, c := range cands {
		ts = append(ts, c.Tolerations...)
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
