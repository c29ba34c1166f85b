package write

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuadmit/gpuadmit/pkg/claim"
	"github.com/gpuadmit/gpuadmit/pkg/intent"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/decide"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
	"github.com/gpuadmit/gpuadmit/pkg/poolowner"
)

// ApplyAlternatives writes a pod placed by alternatives into a copy of pod:
// each GPU container's claim from its alternatives template and its
// accounting request, the tolerations of every pool it may use, and the
// policy's selectors, priority, labels and annotations; no pool's nodeSelector.
func ApplyAlternatives(pod *corev1.Pod, want intent.Pod, d policy.Decision, ch *decide.AltChoice) (Out, error) {
	f := newDraft(pod, d)
	templates := map[string][]claim.Alternative{}
	for _, c := range ch.Containers {
		ct := f.setResources(c.Req, c.Resources())
		alts := c.Alternatives()
		tmpl := claim.AlternativesTemplateName(alts)
		templates[tmpl] = alts
		name := podClaimName(c.Req.Container)
		ct.Resources.Claims = append(ct.Resources.Claims, corev1.ResourceClaim{Name: name})
		f.pod.Spec.ResourceClaims = append(f.pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: name, ResourceClaimTemplateName: ptr.To(tmpl)})
	}
	record.SetMeta(&f.pod.Labels, map[string]string{claim.LabelShare: "true"})
	// The pools follow poolowner.AltPoolsMark, not PoolMark, so
	// poolowner.PoolOf names no pool for such a pod (it is pinned to none);
	// poolowner.PoolsOf names them all.
	own := map[string]string{
		record.AnnotationDecision:    decisionText(altClauses(ch), poolowner.AltPoolsMark, ch.PoolNames(), d.Revision),
		claim.AnnotationAlternatives: claim.EncodeAlternatives(templates),
	}
	if msg, err := f.finish(d, nil, ch.Candidates(), own); msg != "" || err != nil {
		return Out{Denied: msg}, err
	}
	return Out{Pod: f.pod, Written: f.w, Warnings: d.Warnings, Explanation: explainAlternatives(pod, want, d, ch)}, nil
}

// altClauses are the decision record's clauses of a pod placed by
// alternatives: per GPU container, every alternative in order, and its charge.
func altClauses(ch *decide.AltChoice) []string {
	parts := make([]string, 0, len(ch.Containers))
	for _, c := range ch.Containers {
		parts = append(parts, fmt.Sprintf("%s: %s -> the first available of %s (charged %d MiB)", c.Req.Container, c.Req, listed(c), c.ChargeMiB()))
	}
	return parts
}

// listed is the container's alternatives in order: "1) … [rule], 2) … [rule]".
func listed(c decide.AltContainer) string {
	items := make([]string, len(c.Opts))
	for i, o := range c.Opts {
		items[i] = fmt.Sprintf("%d) %s [%s]", i+1, describe(o), ruleOf(o.Assignment.Cand))
	}
	return strings.Join(items, ", ")
}

// describe says what the option gives: "1 MIG 1g.10gb slice of an H100-80GB
// (9984 MiB) on pool h100".
func describe(o decide.AltOption) string {
	alt := o.Alternative()
	switch alt.Backend {
	case claim.BackendMIG:
		return fmt.Sprintf("%d MIG %s slice(s) of an %s (%d MiB) on pool %s", alt.Count, alt.Profile, alt.Model, o.Assignment.GivenMiB, o.Pool.Name)
	case claim.BackendShared:
		return fmt.Sprintf("a share of %d MiB of one %s on pool %s", alt.MiB, alt.Model, o.Pool.Name)
	}
	return fmt.Sprintf("%d whole %s GPU(s) (%d MiB) on pool %s", alt.Count, alt.Model, o.Assignment.GivenMiB, o.Pool.Name)
}

// explainAlternatives is the paragraph of a pod placed by alternatives: what was asked,
// what each container accepts in order and why, what was left out, who
// chooses among them, and what quotas charge.
func explainAlternatives(pod *corev1.Pod, want intent.Pod, d policy.Decision, ch *decide.AltChoice) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Pod %s asks for GPU in %d container(s). ", podName(pod), len(want.Requests))
	for _, c := range ch.Containers {
		fmt.Fprintf(&b, "Container %q asks for %s (%s: %s); policy revision %s accepts, in this order: %s. ",
			c.Req.Container, c.Req, c.Req.Dialect, strings.Join(c.Req.Source, ", "), d.Revision, listed(c))
		fmt.Fprintf(&b, "Its claim %s (template %s) lists them as firstAvailable alternatives, and it requests %s=%d, its largest alternative, for quotas. ",
			podClaimName(c.Req.Container), claim.AlternativesTemplateName(c.Alternatives()), inventory.ResourceMemoryMiB, c.ChargeMiB())
	}
	if len(ch.Left) > 0 {
		fmt.Fprintf(&b, "Left out: %s. ", strings.Join(ch.Left, "; "))
	}
	fmt.Fprintf(&b, "The pod is pinned to no pool: on DRA pools %s the scheduler (%s) picks the node, and the allocator takes there the first alternative that fits, "+
		"on exact free capacity; the stock scheduler prefers nodes where an earlier alternative fits, a preference other scores can outweigh. ",
		strings.Join(ch.PoolNames(), ", "), decide.SchedulerOrDefault(ch.Owner))
	if ts := tolerations(ch.Candidates(), d); len(ts) > 0 {
		fmt.Fprintf(&b, "It tolerates %s. ", formatTolerations(ts))
	}
	if d.PriorityClassName != "" {
		fmt.Fprintf(&b, "It runs as PriorityClass %s (class %s). ", d.PriorityClassName, ClassOf(want))
	}
	b.WriteString("A per-model quota counts only pods placed on one pool, so for this pod it is approximate: an alternative was dropped only where the model's quota had no room at admission.")
	for _, w := range d.Warnings {
		fmt.Fprintf(&b, " Warning: %s.", w)
	}
	return b.String()
}
