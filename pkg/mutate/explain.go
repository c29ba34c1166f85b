package mutate

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/intent"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// decisionText is the short record in gpuadmit.io/decision, one clause per
// GPU container, then the pool and the revision. It is deterministic: the
// same pod, inventory and revision give the same text.
func decisionText(ch *choice, revision string) string {
	parts := make([]string, 0, len(ch.assigns)+2)
	for _, a := range ch.assigns {
		parts = append(parts, fmt.Sprintf("%s: %s -> %s [%s]", a.req.Container, a.req, a.given(), ruleOf(a.cand)))
	}
	parts = append(parts, "pool "+ch.pool.Name)
	return strings.Join(parts, "; ") + revisionMark + revision
}

func ruleOf(c policy.Candidate) string {
	if c.Rule == "" {
		return "unnamed rule"
	}
	return c.Rule
}

// explain is one paragraph a person can follow: what was asked, what policy
// offered, what gpuadmit took and why, and what else changed in the pod.
func explain(pod *corev1.Pod, want intent.Pod, d policy.Decision, ch *choice) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Pod %s asks for GPU in %d container(s). ", podName(pod), len(want.Requests))
	for _, a := range ch.assigns {
		fmt.Fprintf(&b, "Container %q asks for %s (%s: %s); policy revision %s, rule %s, gives it %s on pool %s (%s, %s), %s. ",
			a.req.Container, a.req, a.req.Dialect, strings.Join(a.req.Source, ", "), d.Revision, ruleOf(a.cand),
			a.given(), ch.pool.Name, ch.pool.Model, ch.pool.Mode, a.why)
	}
	if len(ch.skipped) > 0 {
		fmt.Fprintf(&b, "Preferred pools were passed over: %s. ", strings.Join(ch.skipped, "; "))
	}
	fmt.Fprintf(&b, "The pod is pinned to the pool with nodeSelector %s", formatMap(ch.pool.NodeSelector))
	if ch.pool.ExcludeNamed {
		b.WriteString(" and a node affinity that keeps it off nodes of named pools")
	}
	if ts := ch.tolerations(d); len(ts) > 0 {
		fmt.Fprintf(&b, ", tolerates %s", formatTolerations(ts))
	}
	if d.PriorityClassName != "" {
		fmt.Fprintf(&b, ", and runs as PriorityClass %s (class %s)", d.PriorityClassName, classOf(want))
	}
	b.WriteString(". ")
	b.WriteString(bestEffort(ch))
	for _, w := range d.Warnings {
		fmt.Fprintf(&b, " Warning: %s.", w)
	}
	return b.String()
}

func podName(pod *corev1.Pod) string {
	name := pod.Name
	if name == "" {
		name = pod.GenerateName + "…"
	}
	if pod.Namespace != "" {
		return pod.Namespace + "/" + name
	}
	return name
}

func classOf(want intent.Pod) string {
	if want.Class == "" {
		return "from the namespace"
	}
	return want.Class
}

func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

func formatTolerations(ts []corev1.Toleration) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
	}
	return strings.Join(parts, ", ")
}
