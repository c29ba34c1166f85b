package decide

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/gpuadmit/gpuadmit/pkg/intent"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// Choice is the pool a pod goes to and what each GPU container gets there.
type Choice struct {
	Pool    *inventory.Pool
	Assigns []Assignment
	// Skipped says, pool by pool, why earlier candidates were passed over.
	Skipped []string
	// Demand is the pod's GPU resources on the pool, as the scheduler counts them.
	Demand map[string]int64
	// RoomChecked is true when the pools were checked against free
	// capacity, not allocatable only.
	RoomChecked bool
	// Full says, pool by pool, why no pool had room: the pod then waits
	// for room on the first pool that could ever hold it.
	Full []string
	// Priced is true where the pool was picked by price among those with
	// room (pricer), not as the first with room.
	Priced bool
	// Accepted is record.AnnotationAcceptedModels' value: the models of
	// every pool the candidates name.
	Accepted string
}

// Candidates are the candidates taken, one per GPU container, in order.
func (ch *Choice) Candidates() []policy.Candidate {
	out := make([]policy.Candidate, len(ch.Assigns))
	for i, a := range ch.Assigns {
		out[i] = a.Cand
	}
	return out
}

// Choose is choose over the room r says: the free capacity it checks, the
// pricer of the pick, and, for a pod decided again, its recorded pool. The
// choice carries the models of every pool the candidates name (Accepted).
func Choose(ctx context.Context, pod *corev1.Pod, want intent.Pod, d policy.Decision, inv *inventory.Inventory, r Room) (*Choice, []string) {
	order := poolOrder(want, d)
	ch, reasons := choose(pod, want, d, inv, r.check(ctx), r.pricer(ctx, order, inv))
	if ch != nil {
		ch.Accepted = acceptedModels(order, inv)
	}
	return ch, reasons
}

// choose takes the first pool, in the policy's order of preference, on which
// every GPU container has a candidate that fits and one node that takes new
// pods (not cordoned, unreachable or not ready) can hold the whole pod (what
// pods already hold left aside, where room is set). All GPU containers of a
// pod share one node, so they share a pool. When every pool that could hold
// the pod is full or down, the pod is not denied: it waits for room on the
// first of them, as it would with no room check. With a pricer, the pool
// is the cheapest of those with room instead of the first (pricer.cheapest).
func choose(pod *corev1.Pod, want intent.Pod, d policy.Decision, inv *inventory.Inventory, room roomFunc, pr *pricer) (*Choice, []string) {
	ch, reasons := chooseWith(pod, want, d, inv, room, true, pr)
	if ch != nil {
		return ch, reasons
	}
	ch, _ = chooseWith(pod, want, d, inv, nil, false, nil)
	if ch == nil {
		return nil, reasons
	}
	ch.RoomChecked, ch.Full = room != nil, reasons
	return ch, nil
}

// chooseWith is one pass of choose, with or without the room check, on the
// nodes that take new pods (up) or on all. Without a pricer it takes the
// first pool with room; with one it tries every pool and takes the cheapest.
func chooseWith(pod *corev1.Pod, want intent.Pod, d policy.Decision, inv *inventory.Inventory, room roomFunc, up bool, pr *pricer) (*Choice, []string) {
	var reasons []string
	var rooms []roomy
	for _, name := range poolOrder(want, d) {
		pool, ok := inv.Pool(name)
		if !ok {
			reasons = append(reasons, fmt.Sprintf("pool %s: not in the inventory (no node serves it)", name))
			continue
		}
		assigns, demand, why := onPool(pod, want, d, pool, room, up)
		if why != "" {
			reasons = append(reasons, fmt.Sprintf("pool %s: %s", name, why))
			continue
		}
		ch := &Choice{Pool: pool, Assigns: assigns, Skipped: reasons, Demand: demand, RoomChecked: room != nil}
		if pr == nil {
			return ch, nil
		}
		rooms = append(rooms, roomy{ch: ch, price: pr.price(pool.Model), at: len(reasons)})
	}
	if len(rooms) > 0 {
		return pr.cheapest(rooms, reasons), nil
	}
	for _, r := range want.Requests {
		if len(d.Placement[r.Container]) == 0 {
			reasons = append(reasons, fmt.Sprintf("policy revision %s offers no placement for container %q", d.Revision, r.Container))
		}
	}
	return nil, append(reasons, notOffered(want, d, inv)...)
}

// poolOrder lists the pools the candidates name, in order of first mention.
func poolOrder(want intent.Pod, d policy.Decision) []string {
	var order []string
	seen := map[string]bool{}
	for _, r := range want.Requests {
		for _, c := range d.Placement[r.Container] {
			if !seen[c.Pool] {
				seen[c.Pool] = true
				order = append(order, c.Pool)
			}
		}
	}
	return order
}

// onPool fits every GPU container on the pool and returns the pod's demand
// there, or says why it cannot; with up, only on nodes that take new pods.
func onPool(pod *corev1.Pod, want intent.Pod, d policy.Decision, pool *inventory.Pool, room roomFunc, up bool) ([]Assignment, map[string]int64, string) {
	if k, v, clash := SelectorClash(pod.Spec.NodeSelector, pool.NodeSelector); clash {
		return nil, nil, fmt.Sprintf("the pod's nodeSelector %s=%s excludes it (the pool needs %s=%s)", k, pod.Spec.NodeSelector[k], k, v)
	}
	assigns := make([]Assignment, 0, len(want.Requests))
	for _, r := range want.Requests {
		a, why := firstFit(r, d.Placement[r.Container], pool)
		if why != "" {
			return nil, nil, why
		}
		assigns = append(assigns, a)
	}
	nodes, why := eligibleNodes(pod, pool)
	if why != "" {
		return nil, nil, why
	}
	if up {
		if nodes, why = upNodes(pod, nodes); why != "" {
			return nil, nil, why
		}
	}
	demand := podDemand(pod, assigns, pool)
	if !inventory.FitsOn(nodes, demand) {
		return nil, nil, noFitReason(nodes, demand)
	}
	if room != nil {
		if why := room(pool, nodes, demand, podCompute(pod)); why != "" {
			return nil, nil, why
		}
	}
	return assigns, demand, ""
}

// noFitReason says why no node fits, naming a missing accounting capacity,
// which only gpuadmit's agent (or `gpuadmit capacity`) puts on a node.
func noFitReason(nodes []inventory.Node, demand map[string]int64) string {
	for _, n := range nodes {
		if n.Allocatable[inventory.ResourceMemoryMiB] > 0 {
			return fmt.Sprintf("no node of its %d the pod may run on has %s in allocatable", len(nodes), formatDemand(demand))
		}
	}
	return fmt.Sprintf("none of its %d nodes the pod may run on advertises %s (every GPU pod requests it, so that "+
		"quotas count it; gpuadmit's agent advertises it)", len(nodes), inventory.ResourceMemoryMiB)
}

// eligibleNodes are the pool's nodes the pod's own constraints allow: its
// spec.nodeName (pods a DaemonSet or another binder placed), its
// nodeSelector and its required node affinity (matchFields on metadata.name
// included), as the scheduler reads them. A pool none of whose nodes the pod
// may run on would leave it Pending forever, or rejected by the kubelet.
func eligibleNodes(pod *corev1.Pod, pool *inventory.Pool) ([]inventory.Node, string) {
	if unconstrained(pod) {
		return pool.Nodes, "" // read only
	}
	required := nodeaffinity.GetRequiredNodeAffinity(pod)
	var out []inventory.Node
	for _, n := range pool.Nodes {
		if pod.Spec.NodeName != "" && pod.Spec.NodeName != n.Name {
			continue
		}
		if ok, err := required.Match(n.Object()); err == nil && ok {
			out = append(out, n)
		}
	}
	if len(out) > 0 {
		return out, ""
	}
	if pod.Spec.NodeName != "" {
		return nil, fmt.Sprintf("the pod is bound to node %s (spec.nodeName), which is not one of its %d nodes", pod.Spec.NodeName, pool.NodeCount)
	}
	return nil, fmt.Sprintf("none of its %d nodes satisfies the pod's own nodeSelector and required node affinity", pool.NodeCount)
}

// upNodes are the nodes that take the pod now: those not cordoned,
// unreachable or not ready (inventory.Node.Down), and those whose such
// taints the pod tolerates (a DaemonSet's pods tolerate them). A pool none
// of whose nodes is up would leave the pod waiting on an untolerated taint
// while another pool may have room.
func upNodes(pod *corev1.Pod, nodes []inventory.Node) ([]inventory.Node, string) {
	if pod.Spec.NodeName != "" {
		return nodes, "" // bound: the scheduler no longer decides
	}
	var out []inventory.Node
	down := map[string]int{}
	for _, n := range nodes {
		if t := untolerated(pod, n.Down); t != nil {
			down[downReason(t)]++
			continue
		}
		out = append(out, n)
	}
	if len(out) > 0 {
		return out, ""
	}
	parts := make([]string, 0, len(down))
	for why, k := range down {
		parts = append(parts, fmt.Sprintf("%d %s", k, why))
	}
	sort.Strings(parts)
	return nil, fmt.Sprintf("none of its %d nodes the pod may run on takes new pods (%s)", len(nodes), strings.Join(parts, ", "))
}

// untolerated is the first of taints the pod does not tolerate, or nil.
func untolerated(pod *corev1.Pod, taints []corev1.Taint) *corev1.Taint {
	for i := range taints {
		t := &taints[i]
		if !slices.ContainsFunc(pod.Spec.Tolerations, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(klog.Background(), t, false) }) {
			return t
		}
	}
	return nil
}

// downReason names what a lifecycle taint says about its node.
func downReason(t *corev1.Taint) string {
	switch t.Key {
	case corev1.TaintNodeUnschedulable:
		return "cordoned"
	case corev1.TaintNodeUnreachable:
		return "unreachable"
	case corev1.TaintNodeNotReady:
		return "not ready"
	}
	return t.Key
}

// unconstrained: the pod names no node, node selector or required node
// affinity, so every node of a pool may take it.
func unconstrained(pod *corev1.Pod) bool {
	s := &pod.Spec
	return s.NodeName == "" && len(s.NodeSelector) == 0 &&
		(s.Affinity == nil || s.Affinity.NodeAffinity == nil || s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil)
}

// firstFit takes the container's first candidate on this pool that fits.
func firstFit(r intent.Request, cands []policy.Candidate, pool *inventory.Pool) (Assignment, string) {
	var whys []string
	for _, c := range cands {
		if c.Pool != pool.Name {
			continue
		}
		a, err := fit(r, c, pool)
		if err == nil {
			return a, ""
		}
		whys = append(whys, err.Error())
	}
	if len(whys) == 0 {
		return Assignment{}, fmt.Sprintf("the policy offers it no candidate for container %q", r.Container)
	}
	return Assignment{}, strings.Join(whys, "; ")
}

// SelectorClash names a key of need that have sets to another value, and
// need's value; clash is false where have agrees with all of need.
func SelectorClash(have, need map[string]string) (key, value string, clash bool) {
	for k, v := range need {
		if got, ok := have[k]; ok && got != v {
			return k, v, true
		}
	}
	return "", "", false
}

// podDemand counts the pod's GPU resources as Kubernetes does: the larger of
// the app containers' (and sidecars') sum and the largest init container.
func podDemand(pod *corev1.Pod, assigns []Assignment, pool *inventory.Pool) map[string]int64 {
	p := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: make([]corev1.Container, len(pod.Spec.InitContainers)),
		Containers:     make([]corev1.Container, len(pod.Spec.Containers)),
	}}
	for i, c := range pod.Spec.InitContainers {
		p.Spec.InitContainers[i] = corev1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy}
	}
	for _, a := range assigns {
		c := ContainerOf(p, a.Req)
		c.Resources.Requests = a.Resources(pool)
	}
	out := map[string]int64{}
	for name, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{SkipPodLevelResources: true}) {
		out[string(name)] = q.Value()
	}
	return out
}

func formatDemand(demand map[string]int64) string {
	parts := make([]string, 0, len(demand))
	for r, q := range demand {
		parts = append(parts, fmt.Sprintf("%s=%d", r, q))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func resourceList(m map[string]int64) corev1.ResourceList {
	out := make(corev1.ResourceList, len(m))
	for r, q := range m {
		out[corev1.ResourceName(r)] = *resource.NewQuantity(q, resource.DecimalSI)
	}
	return out
}

// ContainerOf finds the container a request was read from.
func ContainerOf(pod *corev1.Pod, r intent.Request) *corev1.Container {
	if r.Kind == intent.App {
		return &pod.Spec.Containers[r.Index]
	}
	return &pod.Spec.InitContainers[r.Index]
}

// NoPoolMessage says why no pool could take the pod, and what the cluster can serve.
func NoPoolMessage(want intent.Pod, reasons []string, inv *inventory.Inventory) string {
	asks := make([]string, len(want.Requests))
	for i, r := range want.Requests {
		asks[i] = fmt.Sprintf("container %q asks for %s (%s)", r.Container, r, strings.Join(r.Source, ", "))
	}
	msg := fmt.Sprintf("no GPU pool can serve this pod: %s", strings.Join(asks, "; "))
	if len(reasons) > 0 {
		msg += ". " + strings.Join(reasons, ". ")
	}
	return msg + ". " + servable(inv)
}

// noPools ends the denial of a pod on a cluster without GPU pools: it says
// what makes a pool, so the user can tell a cluster without GPUs from GPU
// nodes gpuadmit does not read, and how to try gpuadmit without GPUs.
const noPools = "The cluster has no GPU pools. A pool is made of the nodes that advertise GPUs " +
	"(allocatable nvidia.com/gpu, nvidia.com/mig-<profile> or gpuadmit.io/gpu-mem, set by NVIDIA's device plugin or gpuadmit's agent) " +
	"and name their model (GPU Feature Discovery's label nvidia.com/gpu.product, or gpuadmit.io/pool); " +
	"to try gpuadmit without GPUs, add the fake GPU nodes of examples/nodes.yaml as docs/install.md shows."

// servable summarises what the cluster can give, so a denial says what would be accepted.
func servable(inv *inventory.Inventory) string {
	if len(inv.Pools) == 0 {
		return noPools
	}
	var parts []string
	for _, p := range inv.Pools {
		parts = append(parts, fmt.Sprintf("%s (%s, %s, %d MiB per GPU, up to %d GPUs per node)", p.Name, p.Model, p.Mode, p.GPUMemoryMiB, p.GPUsPerNode))
	}
	return "Pools: " + strings.Join(parts, "; ") + "."
}
