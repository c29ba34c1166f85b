package mutate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"gomodules.xyz/jsonpatch/v2"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/intent"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/decide"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/write"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
	"github.com/gpuadmit/gpuadmit/pkg/poolowner"
)

// SchedulerSource lists the second schedulers running now
// (gpuadmit-scheduler), and which pools gpuadmit-scheduler may own.
type SchedulerSource interface {
	Live() []string
	decide.PoolOwners
}

// LabelManaged marks every pod gpuadmit places on a GPU pool, so that a
// replica's pod cache (free capacity, share claim templates) holds those
// pods and no others.
const LabelManaged = "gpuadmit.io/managed"

// PoolOf is the pool gpuadmit's record on pod names, or "" when it has none.
func PoolOf(pod *corev1.Pod) string { return poolowner.PoolOf(pod) }

// PoolsOf is every pool gpuadmit's record lets pod wait on: PoolOf's, or
// the pools of its DRA alternatives; none when it has no record.
func PoolsOf(pod *corev1.Pod) []string { return poolowner.PoolsOf(pod) }

// InventorySource returns the cluster's GPU pools as they are now.
type InventorySource interface {
	Inventory() *inventory.Inventory
}

// StaticInventory is an InventorySource that never changes (the offline CLI, tests).
type StaticInventory struct{ Inv *inventory.Inventory }

// Inventory returns the fixed inventory.
func (s StaticInventory) Inventory() *inventory.Inventory { return s.Inv }

// Mutator decides and rewrites GPU pods. It is safe for concurrent use.
type Mutator struct {
	eval  decide.Evaluator
	inv   InventorySource
	opts  MutatorOptions
	pools atomic.Pointer[preparedPools] // input.pools of the last inventory seen
	memo  decide.Memo
}

// preparedPools is an inventory's pools converted for the policy once.
type preparedPools struct {
	inv   *inventory.Inventory
	pools policy.Pools
}

// NewMutator returns a Mutator deciding with eval over the pools of inv.
func NewMutator(eval decide.Evaluator, inv InventorySource, opts MutatorOptions) *Mutator {
	return &Mutator{eval: eval, inv: inv, opts: opts}
}

// Request is one pod to admit.
type Request struct {
	Pod *corev1.Pod
	// Namespace is the pod's namespace; nil means one with no labels, named after the pod's.
	Namespace *corev1.Namespace
	// Operation is the admission operation; empty means CREATE.
	Operation string
	UserInfo  authenticationv1.UserInfo
	// Quota is the namespace's gpuadmit ResourceQuota; nil when it has none.
	Quota *corev1.ResourceQuota
	// DryRun is true for a dry-run review: nothing is created, so the
	// pod takes no capacity.
	DryRun bool
	// Template is true when Pod is a workload's pod template (a Kueue Job's),
	// decided before any pod exists: it takes no capacity yet.
	Template bool
	// Workload names that workload, where Template is true: its seal is
	// bound to it.
	Workload record.WorkloadRef

	// recordedPool is set while a pod gpuadmit already admitted is decided
	// again: the pool its record names.
	recordedPool string
}

// Result is the outcome of one admission.
type Result struct {
	// Allowed is false when the pod is denied; Message then says why and what would be accepted.
	Allowed bool
	Message string
	// Warnings go back to the client.
	Warnings []string
	// Patch turns the pod as it arrived into Pod; empty when nothing changes.
	Patch []jsonpatch.Operation
	// Pod is the pod as gpuadmit admits it (the arriving pod when denied).
	Pod *corev1.Pod
	// Explanation is a paragraph a person can follow. It says whether the
	// pool was chosen by free capacity (best effort) or allocatable only.
	Explanation string
	// Revision is the policy revision that decided; empty when no policy ran.
	Revision string
	// PassedOver says, pool by pool, why the policy's preferred pools were
	// not taken (a fallback); empty when the first preference was.
	PassedOver []string

	written *record.Written // what the writer wrote, for the seal
}

// Mutate decides for one pod. A denial is a Result with Allowed false; an
// error means gpuadmit itself failed (policy evaluation, an inapplicable decision).
func (m *Mutator) Mutate(ctx context.Context, req Request) (Result, error) {
	if req.Pod == nil {
		return Result{}, fmt.Errorf("no pod to admit")
	}
	if _, mirror := req.Pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		// The kubelet runs a static pod from its manifest and only reports
		// it as this mirror pod; a rewrite would change nothing that runs.
		return Result{Allowed: true, Pod: req.Pod.DeepCopy(), Explanation: "A mirror pod of a static pod: its kubelet runs it from its manifest, so gpuadmit leaves it as it is."}, nil
	}
	if record.HasOwnAnnotations(req.Pod) {
		return m.again(ctx, req)
	}
	if msg := write.ForeignClaimUse(req.Pod); msg != "" {
		return deny(req.Pod, msg), nil
	}
	out, err := m.decide(ctx, req)
	if err != nil || !out.Allowed {
		return out, err
	}
	if w := appliedWarning(req.Pod, out.Pod); w != "" {
		out.Warnings = append(out.Warnings, w)
	}
	if err := m.seal(req, &out); err != nil {
		return Result{}, err
	}
	return withPatch(req.Pod, out)
}

// again verifies a pod that carries gpuadmit's record. A pod an older
// gpuadmit admitted has no LabelManaged (a saved pod applied again): it is
// verified as if it had it, as every pod gpuadmit already decided is, and
// the label is not added (the upgrade notes say how to label such pods).
func (m *Mutator) again(ctx context.Context, req Request) (Result, error) {
	arrived := req.Pod
	req.recordedPool = poolowner.PoolOf(arrived)
	if arrived.Labels[LabelManaged] != "true" {
		req.Pod = arrived.DeepCopy()
		record.SetMeta(&req.Pod.Labels, map[string]string{LabelManaged: "true"})
	}
	res, err := m.verify(ctx, req)
	if err != nil || res.Pod == nil {
		return res, err
	}
	// The result is the pod as it arrived, but for what verify changed (a
	// fresh seal): the label lent above is not written back.
	if arrived.Labels[LabelManaged] != "true" {
		res.Pod = res.Pod.DeepCopy()
		delete(res.Pod.Labels, LabelManaged)
		if arrived.Labels == nil && len(res.Pod.Labels) == 0 {
			res.Pod.Labels = nil
		}
	}
	return res, nil
}

// decide reads the pod's intent, asks the policy and applies its decision.
func (m *Mutator) decide(ctx context.Context, req Request) (Result, error) {
	pod := req.Pod
	want, errs := intent.Read(pod)
	if len(errs) > 0 {
		return deny(pod, errs.ToAggregate().Error()), nil
	}
	if !want.AsksForGPU() {
		return Result{Allowed: true, Pod: pod.DeepCopy(), Explanation: "The pod asks for no GPU; gpuadmit leaves it as it is."}, nil
	}
	inv := m.inv.Inventory()
	pools, err := m.preparedPools(inv)
	if err != nil {
		return Result{}, err
	}
	asked := req
	asked.Pod = m.withoutClusterDefault(ctx, pod)
	in := input(asked, want, pools)
	if m.opts.Schedulers != nil {
		in.Cluster.Schedulers = orNone(m.opts.Schedulers.Live())
		in.Cluster.Owners = poolOwners(m.opts.Schedulers, inv)
	}
	d, err := m.memo.Evaluate(ctx, m.eval, inv, in)
	if err != nil {
		return Result{}, err
	}
	res, err := m.place(ctx, req, want, d, inv)
	if err == nil && res.Revision == "" {
		// Every answer after the policy ran names its revision, denials
		// too (the log line's revision field).
		res.Revision = d.Revision
	}
	return res, err
}

// place applies the policy's decision d to the pod: a denial, a pass, or the
// first candidate pool that can serve it.
func (m *Mutator) place(ctx context.Context, req Request, want intent.Pod, d policy.Decision, inv *inventory.Inventory) (Result, error) {
	pod := req.Pod
	if len(want.Warnings) > 0 {
		d.Warnings = append(slices.Clone(want.Warnings), d.Warnings...)
	}
	if len(d.Deny) > 0 {
		return denyByPolicy(pod, d), nil
	}
	if d.Pass {
		return passed(pod, d), nil
	}
	if err := checkPlacementNames(want, d); err != nil {
		return Result{}, err
	}
	d, gated := decide.GateSchedulers(pod, d, req.Template, m.opts.Schedulers)
	if alt := m.alternatives(pod, want, d, inv, req.Quota); alt != nil {
		alt.Left = append(gated, alt.Left...)
		return m.placeAlternatives(ctx, req, want, d, alt)
	}
	ch, reasons := decide.Choose(ctx, pod, want, d, inv, m.room(req))
	if ch == nil {
		reasons = append(gated, reasons...)
		r := deny(pod, decide.NoPoolMessage(want, reasons, inv))
		if len(d.Warnings) > 0 {
			r.Warnings = d.Warnings
		}
		return r, nil
	}
	ch.Skipped = append(gated, ch.Skipped...)
	out, err := write.Apply(pod, want, d, ch)
	if err != nil {
		return Result{}, err
	}
	if out.Denied != "" {
		return deny(pod, out.Denied), nil
	}
	res := resultOf(out, d.Revision)
	res.PassedOver = ch.Skipped
	return m.finish(ctx, req, res, want, d, ch.Assigns[0].Cand.SchedulerName, "pool "+ch.Pool.Name, func() { m.noteAdmitted(req, res.Pod, ch) })
}

// room is what the choice of one pool reads beyond allocatable: the
// Capacity and Demand wired, and, on a re-decision of a pod gpuadmit
// already admitted, the pool its record names.
func (m *Mutator) room(req Request) decide.Room {
	return decide.Room{Capacity: m.opts.Capacity, Demand: m.opts.Demand, Recorded: req.recordedPool}
}

// noteAdmitted tells the Capacity what a freshly admitted pod will take.
// Dry runs and re-decisions of pods already admitted take nothing, and
// neither does a pod its namespace's gpuadmit ResourceQuota will refuse:
// the API server runs ResourceQuota after the webhook, so that pod never
// comes. Pods placed by DRA alternatives never get here (placeAlternatives):
// the scheduler counts their devices exactly, on no guess of the webhook's.
func (m *Mutator) noteAdmitted(req Request, pod *corev1.Pod, ch *decide.Choice) {
	if m.opts.Capacity == nil || req.DryRun || req.Template || req.recordedPool != "" {
		return
	}
	if quotaRefuses(req.Quota, ch.Demand) != "" {
		return
	}
	m.opts.Capacity.Admitted(pod, ch.Pool.Name, ch.Demand)
}

// quotaRefuses names a resource of demand that the quota's status has less
// left of than demand asks, or "". The status is the quota's cached
// usage. Where it lags a deletion, a pod that will be created is not
// entered and goes uncounted until the cache shows it, for a moment; where
// it lags a creation, ResourceQuota may refuse a pod this lets through,
// and the ledger drops that pod's entry once the cache shows a later
// admission (pkg/webhook's ledgerOvertake).
func quotaRefuses(q *corev1.ResourceQuota, demand map[string]int64) string {
	for r, want := range demand {
		if left, ok := decide.QuotaLeft(q, r); ok && left < want {
			return r
		}
	}
	return ""
}

// alternatives is decide.ChooseAlternatives, or nil where the webhook is told to
// place every pod on one pool (MutatorOptions.NoAlternatives).
func (m *Mutator) alternatives(pod *corev1.Pod, want intent.Pod, d policy.Decision, inv *inventory.Inventory, quota *corev1.ResourceQuota) *decide.AltChoice {
	if m.opts.NoAlternatives {
		return nil
	}
	return decide.ChooseAlternatives(pod, want, d, inv, quota)
}

// placeAlternatives applies the decision to a pod placed by alternatives:
// no pool is chosen, so no free capacity is counted against one.
func (m *Mutator) placeAlternatives(ctx context.Context, req Request, want intent.Pod, d policy.Decision, alt *decide.AltChoice) (Result, error) {
	out, err := write.ApplyAlternatives(req.Pod, want, d, alt)
	if err != nil {
		return Result{}, err
	}
	if out.Denied != "" {
		return deny(req.Pod, out.Denied), nil
	}
	res := resultOf(out, d.Revision)
	res.PassedOver = alt.Left
	where := "pools " + strings.Join(alt.PoolNames(), ", ")
	return m.finish(ctx, req, res, want, d, alt.Owner, where, func() {})
}

// finish is the end of every placement: what Kueue counted, the
// PriorityClass, gpuadmit's label, and the scheduler of the pools (where).
func (m *Mutator) finish(ctx context.Context, req Request, res Result, want intent.Pod, d policy.Decision, owner, where string, admitted func()) (Result, error) {
	pod := req.Pod
	// A pod decided again for its record (req.recordedPool) was counted
	// by Kueue as gpuadmit wrote it.
	if msg := kueueUncounted(pod, res.Pod); msg != "" && req.recordedPool == "" {
		return deny(pod, msg), nil
	}
	if msg := m.missingPriorityClass(ctx, d, want); msg != "" {
		return deny(pod, msg), nil
	}
	record.SetMeta(&res.Pod.Labels, map[string]string{LabelManaged: "true"})
	m.resolvePriority(ctx, res.Pod)
	admitted()
	note, warning, err := write.SetScheduler(res.Pod, d, owner, where)
	if warning != "" {
		res.Warnings = append(res.Warnings, warning)
	}
	res.Explanation += note
	return res, err
}

// resultOf is the Result of a pod the writer wrote.
func resultOf(out write.Out, revision string) Result {
	return Result{Allowed: true, Pod: out.Pod, Warnings: out.Warnings, Explanation: out.Explanation, Revision: revision, written: out.Written}
}

// seal seals an allowed result's record under the current key, at the
// time now, bound to the workload where the pod is its template.
func (m *Mutator) seal(req Request, res *Result) error {
	if !res.Allowed {
		return nil
	}
	var wl *record.WorkloadRef
	if req.Template {
		wl = &req.Workload
	}
	return record.Seal(m.keys(), namespaceOf(req).Name, res.Pod, res.written, m.now(), wl)
}

// keys are the record keys in force; none without a record.KeySource.
func (m *Mutator) keys() record.KeySet {
	if m.opts.RecordKeys == nil {
		return record.KeySet{}
	}
	return m.opts.RecordKeys.RecordKeys()
}

// preparedPools converts the inventory's pools once per inventory (an
// inventory is immutable; a new one comes with every node change).
func (m *Mutator) preparedPools(inv *inventory.Inventory) (policy.Pools, error) {
	if p := m.pools.Load(); p != nil && p.inv == inv {
		return p.pools, nil
	}
	pools, err := policy.PreparePools(inv.Pools)
	if err != nil {
		return policy.Pools{}, err
	}
	m.pools.Store(&preparedPools{inv: inv, pools: pools})
	return pools, nil
}

func input(req Request, want intent.Pod, pools policy.Pools) policy.Input {
	op := req.Operation
	if op == "" {
		op = "CREATE"
	}
	return policy.Input{
		Operation:  op,
		UserInfo:   req.UserInfo,
		Namespace:  namespaceOf(req),
		Pod:        policy.View(req.Pod),
		Containers: want.Requests,
		Hints:      hints(want),
		Pools:      pools,
		Quota:      quotaInput(req.Quota),
		Cluster:    policy.Cluster{Schedulers: []string{}, Owners: map[string]string{}},
	}
}

// hints are the pod-level hints as the policy reads them, lists never null.
func hints(want intent.Pod) policy.Hints {
	return policy.Hints{Class: want.Class, Backend: string(want.Backend), Model: want.Model,
		UseTypes: orNone(want.UseTypes), AvoidTypes: orNone(want.AvoidTypes)}
}

func orNone(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// quotaInput is input.quota: the hard limits and usage of the namespace's
// gpuadmit ResourceQuota, by resource without the "requests." prefix, as
// integers. The API server's ResourceQuota stays the authority; policies use
// this for early, friendlier denials and for choosing a fallback that fits.
func quotaInput(rq *corev1.ResourceQuota) map[string]any {
	in := map[string]any{"hard": map[string]int64{}, "used": map[string]int64{}}
	if rq == nil {
		return in
	}
	in["name"] = rq.Name
	for key, list := range map[string]corev1.ResourceList{"hard": rq.Status.Hard, "used": rq.Status.Used} {
		m := in[key].(map[string]int64)
		for r, q := range list {
			m[strings.TrimPrefix(string(r), "requests.")] = q.Value()
		}
	}
	return in
}

func namespaceOf(req Request) policy.Namespace {
	if ns := req.Namespace; ns != nil {
		return policy.Namespace{Name: ns.Name, Labels: orEmpty(ns.Labels), Annotations: orEmpty(ns.Annotations)}
	}
	name := req.Pod.Namespace
	if name == "" {
		name = "default"
	}
	return policy.Namespace{Name: name, Labels: map[string]string{}, Annotations: map[string]string{}}
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// poolOwners is input.cluster.owners: each pool's state in the record.
func poolOwners(s SchedulerSource, inv *inventory.Inventory) map[string]string {
	out := make(map[string]string, len(inv.Pools))
	for _, p := range inv.Pools {
		out[p.Name] = s.PoolOwner(p.Name)
	}
	return out
}

// passed is the result for a pod whose own scheduler coexists with gpuadmit:
// the pod as it arrived, with the policy's warnings.
func passed(pod *corev1.Pod, d policy.Decision) Result {
	return Result{Allowed: true, Pod: pod.DeepCopy(), Warnings: d.Warnings, Revision: d.Revision,
		Explanation: fmt.Sprintf("spec.schedulerName %q decides for this pod: policy revision %s leaves that scheduler's pods to it, so gpuadmit changed nothing.",
			pod.Spec.SchedulerName, d.Revision)}
}

func deny(pod *corev1.Pod, msg string) Result {
	return Result{Allowed: false, Message: msg, Pod: pod, Explanation: "Denied: " + msg}
}

func denyByPolicy(pod *corev1.Pod, d policy.Decision) Result {
	msg := fmt.Sprintf("denied by policy revision %s: %s", d.Revision, strings.Join(d.Deny, "; "))
	r := deny(pod, msg)
	r.Warnings, r.Revision = d.Warnings, d.Revision
	return r
}

// checkPlacementNames refuses a decision that places a container that asks for no GPU.
func checkPlacementNames(want intent.Pod, d policy.Decision) error {
	asks := map[string]bool{}
	for _, r := range want.Requests {
		asks[r.Container] = true
	}
	for name, cands := range d.Placement {
		if !asks[name] && len(cands) > 0 {
			return fmt.Errorf("policy revision %s places container %q (rule %s), which asks for no GPU", d.Revision, name, cands[0].Rule)
		}
	}
	return nil
}
