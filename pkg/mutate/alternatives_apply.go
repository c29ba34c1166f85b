package mutate

import (
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuadmit/gpuadmit/pkg/claim"
	"github.com/gpuadmit/gpuadmit/pkg/intent"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
	"github.com/gpuadmit/gpuadmit/pkg/poolowner"
)

// applyAlternatives writes a pod placed by alternatives into a copy of pod:
// each GPU container's claim from its alternatives template and its
// accounting request, the tolerations of every pool it may use, and the
// policy's selectors, priority, labels and annotations; no pool's nodeSelector.
func applyAlternatives(pod *corev1.Pod, want intent.Pod, d policy.Decision, ch *altChoice) (Result, error) {
	out := pod.DeepCopy()
	rec := record.Original{}
	w := &record.Written{Revision: d.Revision, Priority: d.PriorityClassName,
		Labels: maps.Clone(d.Labels), Annotations: userMeta(d.Annotations)}
	templates := map[string][]claim.Alternative{}
	for _, c := range ch.containers {
		ct := containerOf(out, c.req)
		rec[ct.Name] = record.OriginalGPU(ct)
		res := resourceList(map[string]int64{inventory.ResourceMemoryMiB: c.chargeMiB()})
		setResources(ct, res)
		w.SetResources(ct.Name, res)
		alts := c.alternatives()
		tmpl := claim.AlternativesTemplateName(alts)
		templates[tmpl] = alts
		name := podClaimName(c.req.Container)
		ct.Resources.Claims = append(ct.Resources.Claims, corev1.ResourceClaim{Name: name})
		out.Spec.ResourceClaims = append(out.Spec.ResourceClaims, corev1.PodResourceClaim{Name: name, ResourceClaimTemplateName: ptr.To(tmpl)})
	}
	record.SetMeta(&out.Labels, map[string]string{claim.LabelShare: "true"})
	w.AddClaims(out)
	if msg := addSelectors(out, nil, d.NodeSelector); msg != "" {
		return deny(pod, msg), nil
	}
	w.NodeSelector = merged(nil, d.NodeSelector)
	w.Tolerations = addTolerations(out, ch.tolerations(d))
	setPriority(out, d.PriorityClassName)
	record.SetMeta(&out.Labels, d.Labels)
	record.SetMeta(&out.Annotations, d.Annotations)
	raw, err := rec.Encode()
	if err != nil {
		return Result{}, err
	}
	record.SetMeta(&out.Annotations, map[string]string{
		record.AnnotationDecision:    ch.decisionText(d.Revision),
		record.AnnotationRequest:     raw,
		claim.AnnotationAlternatives: claim.EncodeAlternatives(templates),
	})
	return Result{
		Allowed:     true,
		Pod:         out,
		Warnings:    d.Warnings,
		Explanation: ch.explain(pod, want, d),
		Revision:    d.Revision,
		written:     w,
	}, nil
}

// altPoolsMark precedes the pools in the decision record of a pod placed by
// alternatives. It is not poolMark ("; pool "), so PoolOf names no pool for
// such a pod (it is pinned to none); poolowner.PoolsOf names them all.
const altPoolsMark = poolowner.AltPoolsMark

// decisionText is gpuadmit.io/decision for a pod placed by alternatives:
// per GPU container, every alternative in order, then the pools and the
// revision. It is deterministic, as decisionText of one pool is.
func (ch *altChoice) decisionText(revision string) string {
	parts := make([]string, 0, len(ch.containers))
	for _, c := range ch.containers {
		parts = append(parts, fmt.Sprintf("%s: %s -> the first available of %s (charged %d MiB)", c.req.Container, c.req, c.listed(), c.chargeMiB()))
	}
	return strings.Join(parts, "; ") + altPoolsMark + strings.Join(ch.poolNames(), ", ") + revisionMark + revision
}

// listed is the container's alternatives in order: "1) … [rule], 2) … [rule]".
func (c altContainer) listed() string {
	items := make([]string, len(c.opts))
	for i, o := range c.opts {
		items[i] = fmt.Sprintf("%d) %s [%s]", i+1, o.describe(), ruleOf(o.a.cand))
	}
	return strings.Join(items, ", ")
}

func (ch *altChoice) poolNames() []string {
	pools := ch.pools()
	names := make([]string, len(pools))
	for i, p := range pools {
		names[i] = p.Name
	}
	return names
}

// explain is the paragraph of a pod placed by alternatives: what was asked,
// what each container accepts in order and why, what was left out, who
// chooses among them, and what quotas charge.
func (ch *altChoice) explain(pod *corev1.Pod, want intent.Pod, d policy.Decision) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Pod %s asks for GPU in %d container(s). ", podName(pod), len(want.Requests))
	for _, c := range ch.containers {
		fmt.Fprintf(&b, "Container %q asks for %s (%s: %s); policy revision %s accepts, in this order: %s. ",
			c.req.Container, c.req, c.req.Dialect, strings.Join(c.req.Source, ", "), d.Revision, c.listed())
		fmt.Fprintf(&b, "Its claim %s (template %s) lists them as firstAvailable alternatives, and it requests %s=%d, its largest alternative, for quotas. ",
			podClaimName(c.req.Container), claim.AlternativesTemplateName(c.alternatives()), inventory.ResourceMemoryMiB, c.chargeMiB())
	}
	if len(ch.left) > 0 {
		fmt.Fprintf(&b, "Left out: %s. ", strings.Join(ch.left, "; "))
	}
	fmt.Fprintf(&b, "The pod is pinned to no pool: on DRA pools %s the scheduler (%s) picks the node, and the allocator takes there the first alternative that fits, "+
		"on exact free capacity; the stock scheduler prefers nodes where an earlier alternative fits, a preference other scores can outweigh. ",
		strings.Join(ch.poolNames(), ", "), schedulerOrDefault(ch.owner))
	if ts := ch.tolerations(d); len(ts) > 0 {
		fmt.Fprintf(&b, "It tolerates %s. ", formatTolerations(ts))
	}
	if d.PriorityClassName != "" {
		fmt.Fprintf(&b, "It runs as PriorityClass %s (class %s). ", d.PriorityClassName, classOf(want))
	}
	b.WriteString("A per-model quota counts only pods placed on one pool, so for this pod it is approximate: an alternative was dropped only where the model's quota had no room at admission.")
	for _, w := range d.Warnings {
		fmt.Fprintf(&b, " Warning: %s.", w)
	}
	return b.String()
}
