package write

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/claim"
	"github.com/gpuadmit/gpuadmit/pkg/intent"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/decide"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
	"github.com/gpuadmit/gpuadmit/pkg/poolowner"
)

// decisionText is the short record in gpuadmit.io/decision: one clause per
// GPU container, then mark and the pools (poolowner.PoolMark and the pool,
// or poolowner.AltPoolsMark and the pools of a pod placed by alternatives),
// then the revision. It is deterministic: the same pod, inventory and
// revision give the same text.
func decisionText(parts []string, mark string, pools []string, revision string) string {
	return strings.Join(parts, "; ") + mark + strings.Join(pools, ", ") + poolowner.RevisionMark + revision
}

// clauses are the decision record's clauses of a pod placed on one pool:
// per GPU container, what it asked, what it was given and by which rule.
func clauses(ch *decide.Choice) []string {
	parts := make([]string, 0, len(ch.Assigns))
	for _, a := range ch.Assigns {
		parts = append(parts, fmt.Sprintf("%s: %s -> %s [%s]", a.Req.Container, a.Req, given(a), ruleOf(a.Cand)))
	}
	return parts
}

func ruleOf(c policy.Candidate) string {
	if c.Rule == "" {
		return "unnamed rule"
	}
	return c.Rule
}

// explain is one paragraph a person can follow: what was asked, what policy
// offered, what gpuadmit took and why, and what else changed in the pod.
func explain(pod *corev1.Pod, want intent.Pod, d policy.Decision, ch *decide.Choice) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Pod %s asks for GPU in %d container(s). ", podName(pod), len(want.Requests))
	for _, a := range ch.Assigns {
		fmt.Fprintf(&b, "Container %q asks for %s (%s: %s); policy revision %s, rule %s, gives it %s on pool %s (%s, %s), %s. ",
			a.Req.Container, a.Req, a.Req.Dialect, strings.Join(a.Req.Source, ", "), d.Revision, ruleOf(a.Cand),
			given(a), ch.Pool.Name, ch.Pool.Model, ch.Pool.Mode, a.Why)
	}
	if len(ch.Skipped) > 0 {
		fmt.Fprintf(&b, "Preferred pools were passed over: %s. ", strings.Join(ch.Skipped, "; "))
	}
	fmt.Fprintf(&b, "The pod is pinned to the pool with nodeSelector %s", decide.FormatSelector(ch.Pool.NodeSelector))
	if ch.Pool.ExcludeNamed {
		b.WriteString(" and a node affinity that keeps it off nodes of named pools")
	}
	if ts := tolerations(ch.Candidates(), d); len(ts) > 0 {
		fmt.Fprintf(&b, ", tolerates %s", formatTolerations(ts))
	}
	if d.PriorityClassName != "" {
		fmt.Fprintf(&b, ", and runs as PriorityClass %s (class %s)", d.PriorityClassName, ClassOf(want))
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

// ClassOf is the pod's workload class as an explanation names it.
func ClassOf(want intent.Pod) string {
	if want.Class == "" {
		return "from the namespace"
	}
	return want.Class
}

func formatTolerations(ts []corev1.Toleration) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
	}
	return strings.Join(parts, ", ")
}

// given describes what the container receives: "nvidia.com/gpu=1 (MIG 1g.5gb, 4864 MiB)".
func given(a decide.Assignment) string {
	if a.ClaimMiB > 0 {
		return fmt.Sprintf("a claim of %d MiB on one GPU (%s)", a.ClaimMiB, claim.ClassShare)
	}
	if a.Profile != "" {
		return fmt.Sprintf("%s=%d (MIG %s, %d MiB)", a.Resource, a.Quantity, a.Profile, a.GivenMiB)
	}
	return fmt.Sprintf("%s=%d (%d MiB)", a.Resource, a.Quantity, a.GivenMiB)
}

// bestEffort is the explanation's note on how the pool was checked.
func bestEffort(ch *decide.Choice) string {
	if len(ch.Full) > 0 {
		return fmt.Sprintf("No pool offered had room (%s), so the pod waits for room on pool %s, the first whose nodes could hold it; "+
			"this is best effort: a pod's resources cannot change once it is created, and the scheduler decides where it runs.",
			strings.Join(ch.Full, "; "), ch.Pool.Name)
	}
	if !ch.RoomChecked {
		return "Pools were checked against their nodes' allocatable only, not against what pods already hold (no pod cache is wired, as in the offline CLI)."
	}
	if ch.Priced {
		return "gpuadmit took, of the pools that looked free after the pods bound, nominated or admitted to them, the one of least price " +
			"(the expected demand of pods that only some GPU models can serve, over its free GPU; ties keep the policy's order); this is best effort: " +
			"a pod's resources cannot change once it is created, and the scheduler decides where it runs."
	}
	return "gpuadmit took the first pool that looked free, after the pods bound, nominated or admitted to it; this is best effort: " +
		"a pod's resources cannot change once it is created, and the scheduler decides where it runs."
}
