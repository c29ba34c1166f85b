package mutate

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpuadmit/gpuadmit/internal/policytest"
	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// countingEval answers as the default policies under revision rev and
// counts the evaluations that reached the policy.
type countingEval struct {
	mu    sync.Mutex
	rev   string
	reads policy.PodReads // the zero value: the whole pod is read
	calls int
}

func (e *countingEval) Active() *policy.Set {
	e.mu.Lock()
	defer e.mu.Unlock()
	return &policy.Set{Revision: e.rev, Reads: e.reads}
}

// Now is the real time: the default policies do not read input.now.
func (e *countingEval) Now() time.Time { return time.Now() }

func (e *countingEval) Evaluate(ctx context.Context, in policy.Input) (policy.Decision, error) {
	e.mu.Lock()
	e.calls++
	rev := e.rev
	e.mu.Unlock()
	d, err := defaultEngine.Evaluate(ctx, in)
	d.Revision = rev
	return d, err
}

func (e *countingEval) count() int { e.mu.Lock(); defer e.mu.Unlock(); return e.calls }

// swappableInventory is an inventory the test replaces, as a node change would.
type swappableInventory struct {
	mu  sync.Mutex
	inv *inventory.Inventory
}

func (s *swappableInventory) Inventory() *inventory.Inventory {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inv
}

func memoMutator(t *testing.T) (*Mutator, *countingEval, *swappableInventory) {
	t.Helper()
	eval := &countingEval{rev: "rev-1"}
	inv := &swappableInventory{inv: exampleInventory(t)}
	return NewMutator(eval, inv, MutatorOptions{}), eval, inv
}

// templatePod is a pod of a workload's template in team-a, asking HAMi for 3000 MiB.
func templatePod(name string, labels, annotations map[string]string) *corev1.Pod {
	p := pod(name, map[string]string{"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"})
	p.Namespace = "team-a"
	p.Labels, p.Annotations = labels, annotations
	return p
}

func decideOnce(t *testing.T, m *Mutator, req Request) Result {
	t.Helper()
	res, err := m.Mutate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Allowed {
		t.Fatalf("%s denied: %s", req.Pod.Name, res.Message)
	}
	return res
}

func encoded(t *testing.T, res Result) string {
	t.Helper()
	b, err := json.Marshal(struct {
		Pod         *corev1.Pod
		Patch       any
		Warnings    []string
		Explanation string
	}{res.Pod, res.Patch, res.Warnings, res.Explanation})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestMemoizedDecisionIsTheFreshOne: the second pod of a template is
// decided from the memo, and its result is byte for byte what a replica
// without the memo (a fresh policy evaluation) gives.
func TestMemoizedDecisionIsTheFreshOne(t *testing.T) {
	m, eval, _ := memoMutator(t)
	ns := teamA(t)["team-a"]
	first := decideOnce(t, m, Request{Pod: templatePod("p", nil, nil), Namespace: ns})
	second := decideOnce(t, m, Request{Pod: templatePod("p", nil, nil), Namespace: ns})
	if eval.count() != 1 {
		t.Fatalf("the policy ran %d times for two pods of one template, want once", eval.count())
	}
	fresh := decideOnce(t, NewMutator(&countingEval{rev: "rev-1"}, StaticInventory{Inv: exampleInventory(t)}, MutatorOptions{}),
		Request{Pod: templatePod("p", nil, nil), Namespace: ns})
	if got, want := encoded(t, second), encoded(t, fresh); got != want {
		t.Errorf("the memoized decision differs from a fresh one:\n memo:  %s\n fresh: %s", got, want)
	}
	if got, want := encoded(t, first), encoded(t, fresh); got != want {
		t.Errorf("the first decision differs from a fresh one:\n first: %s\n fresh: %s", got, want)
	}
}

// TestMemoKeyCoversEverythingThePolicyReads: a change to any part of the
// key (the pod's view, the namespace's labels, who creates the pod, the
// quota and its usage, the inventory, the policy revision) asks the policy
// again.
func TestMemoKeyCoversEverythingThePolicyReads(t *testing.T) {
	m, eval, inv := memoMutator(t)
	ns := teamA(t)["team-a"]
	base := func() Request { return Request{Pod: templatePod("p", nil, nil), Namespace: ns} }
	decideOnce(t, m, base())
	changes := []struct {
		name   string
		change func(*Request)
	}{
		{"the pod's GPU request", func(r *Request) {
			r.Pod.Spec.Containers[0].Resources.Limits["nvidia.com/gpumem"] = resource.MustParse("3100")
		}},
		{"the pod's labels", func(r *Request) { r.Pod.Labels = map[string]string{"team": "vision"} }},
		{"the pod's nodeSelector", func(r *Request) { r.Pod.Spec.NodeSelector = map[string]string{"zone": "a"} }},
		{"the pod's priority class", func(r *Request) { r.Pod.Spec.PriorityClassName = "gpuadmit-batch" }},
		{"the namespace's labels", func(r *Request) {
			r.Namespace = r.Namespace.DeepCopy()
			r.Namespace.Labels["gpuadmit.io/class"] = "training"
		}},
		{"who creates the pod", func(r *Request) {
			r.UserInfo = authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:job-controller"}
		}},
		{"the namespace's quota usage", func(r *Request) {
			r.Quota = &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "gpuadmit"}, Status: corev1.ResourceQuotaStatus{
				Hard: corev1.ResourceList{"requests." + allocator.ResourceMemoryMiB: resource.MustParse("100000")},
				Used: corev1.ResourceList{"requests." + allocator.ResourceMemoryMiB: resource.MustParse("4864")}}}
		}},
		{"the namespace's quota usage, again", func(r *Request) {
			r.Quota = &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "gpuadmit"}, Status: corev1.ResourceQuotaStatus{
				Hard: corev1.ResourceList{"requests." + allocator.ResourceMemoryMiB: resource.MustParse("100000")},
				Used: corev1.ResourceList{"requests." + allocator.ResourceMemoryMiB: resource.MustParse("9728")}}}
		}},
	}
	for _, c := range changes {
		before := eval.count()
		r := base()
		c.change(&r)
		if _, err := m.Mutate(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if eval.count() != before+1 {
			t.Errorf("%s changed, and the policy was not asked again (%d evaluations before, %d after)", c.name, before, eval.count())
		}
	}

	before := eval.count()
	nodes := readNodes(t, "../../examples/nodes.yaml")
	nodes[0].Status.Allocatable["nvidia.com/mig-1g.10gb"] = resource.MustParse("13")
	inv.mu.Lock()
	inv.inv = inventory.Build(nodes, allocator.Default())
	inv.mu.Unlock()
	decideOnce(t, m, base())
	if eval.count() != before+1 {
		t.Errorf("a pool's allocatable changed, and the policy was not asked again")
	}
	eval.mu.Lock()
	eval.rev = "rev-2"
	eval.mu.Unlock()
	res := decideOnce(t, m, base())
	if eval.count() != before+2 {
		t.Errorf("the policy revision changed, and the policy was not asked again")
	}
	if res.Revision != "rev-2" {
		t.Errorf("the decision after the revision changed is of revision %q", res.Revision)
	}
	decideOnce(t, m, base())
	if eval.count() != before+2 {
		t.Errorf("nothing changed, and the policy was asked again")
	}
}

// TestMemoSurvivesARebuildThatChangesNoPool: GPU Feature Discovery
// rewrites a label on every GPU node once a minute, and a rebuilt
// inventory whose pools hold what they held gives the policy the same
// input: the memo keeps answering, and its answer is the fresh one.
func TestMemoSurvivesARebuildThatChangesNoPool(t *testing.T) {
	m, eval, inv := memoMutator(t)
	ns := teamA(t)["team-a"]
	req := func() Request { return Request{Pod: templatePod("p", nil, nil), Namespace: ns} }
	decideOnce(t, m, req())
	nodes := readNodes(t, "../../examples/nodes.yaml")
	for i := range nodes {
		nodes[i].Labels["nvidia.com/gfd.timestamp"] = "1764240060"
		nodes[i].Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	}
	rebuilt := inventory.Build(nodes, allocator.Default())
	inv.mu.Lock()
	inv.inv = rebuilt
	inv.mu.Unlock()
	got := decideOnce(t, m, req())
	if eval.count() != 1 {
		t.Errorf("the policy ran %d times: a rebuilt inventory with the same pools started the memo over", eval.count())
	}
	fresh := decideOnce(t, NewMutator(&countingEval{rev: "rev-1"}, StaticInventory{Inv: rebuilt}, MutatorOptions{}), req())
	if diff := cmp.Diff(encoded(t, fresh), encoded(t, got)); diff != "" {
		t.Errorf("the memoized decision is not the fresh one (-fresh +memo):\n%s", diff)
	}
}

// TestPodsOfOneWorkloadHitTheMemo: the pods of a StatefulSet and of an
// indexed Job differ only in their names and index labels, which a
// policy does not see; the policy runs once per workload.
func TestPodsOfOneWorkloadHitTheMemo(t *testing.T) {
	m, eval, _ := memoMutator(t)
	ns := teamA(t)["team-a"]
	for i, idx := range []string{"0", "1", "2"} {
		sts := templatePod("web-"+idx, map[string]string{"app": "web", "statefulset.kubernetes.io/pod-name": "web-" + idx,
			"apps.kubernetes.io/pod-index": idx, "controller-revision-hash": "web-6b7f"}, nil)
		decideOnce(t, m, Request{Pod: sts, Namespace: ns})
		job := templatePod("", map[string]string{"batch.kubernetes.io/job-name": "train", "batch.kubernetes.io/job-completion-index": idx},
			map[string]string{"batch.kubernetes.io/job-completion-index": idx})
		job.GenerateName = "train-" + idx + "-"
		decideOnce(t, m, Request{Pod: job, Namespace: ns})
		if want := 2; eval.count() != want {
			t.Fatalf("after %d pods of each workload the policy ran %d times, want %d (once per workload)", i+1, eval.count(), want)
		}
	}
}

// TestMemoKeysWhatTheDefaultPoliciesRead: the embedded policies read the
// pod's nodeSelector, priorityClassName and schedulerName and its
// gpuadmit.io/backend annotation, not its labels, tolerations or affinity
// (policy.PodReads). Pods that differ only in those share one decision,
// byte for byte the fresh one, as a DaemonSet's pods do (each with node
// affinity to its own node); a different field read asks the policy again.
func TestMemoKeysWhatTheDefaultPoliciesRead(t *testing.T) {
	m, eval, _ := memoMutator(t)
	eval.reads = defaultEngine.Active().Reads
	ns := teamA(t)["team-a"]
	decideOnce(t, m, Request{Pod: templatePod("p-0", map[string]string{"bench.gpuadmit.io/pod": "p-0"}, nil), Namespace: ns})
	alike := []*corev1.Pod{
		templatePod("p-1", map[string]string{"bench.gpuadmit.io/pod": "p-1"}, nil),
		templatePod("p-2", map[string]string{"bench.gpuadmit.io/pod": "p-2", "team": "vision"}, map[string]string{"example.com/owner": "p-2"}),
		onNode(templatePod("ds-0", nil, nil), "h100-mig-0"),
		onNode(templatePod("ds-1", nil, nil), "h100-mig-1"),
	}
	for _, p := range alike {
		got := decideOnce(t, m, Request{Pod: p, Namespace: ns})
		fresh := decideOnce(t, NewMutator(&countingEval{rev: "rev-1"}, StaticInventory{Inv: exampleInventory(t)}, MutatorOptions{}),
			Request{Pod: p.DeepCopy(), Namespace: ns})
		if a, b := encoded(t, got), encoded(t, fresh); a != b {
			t.Errorf("%s: the memoized decision differs from a fresh one:\n memo:  %s\n fresh: %s", p.Name, a, b)
		}
	}
	if eval.count() != 1 {
		t.Errorf("pods that differ only in what the policies do not read: the policy ran %d times, want once", eval.count())
	}
	differ := map[string]*corev1.Pod{
		"backend annotation": templatePod("q-1", nil, map[string]string{"gpuadmit.io/backend": "shared"}),
		"nodeSelector":       templatePod("q-2", nil, nil),
		"priorityClassName":  templatePod("q-3", nil, nil),
		"schedulerName":      templatePod("q-4", nil, nil),
	}
	differ["nodeSelector"].Spec.NodeSelector = map[string]string{"zone": "a"}
	differ["priorityClassName"].Spec.PriorityClassName = "gpuadmit-batch"
	differ["schedulerName"].Spec.SchedulerName = "gpuadmit-scheduler"
	for name, p := range differ {
		before := eval.count()
		if _, err := m.Mutate(context.Background(), Request{Pod: p, Namespace: ns}); err != nil {
			t.Fatal(err)
		}
		if eval.count() != before+1 {
			t.Errorf("the pod's %s changed, and the policy was not asked again", name)
		}
	}
}

// onNode gives pod what the DaemonSet controller adds to each of its pods:
// the tolerations it adds to every DaemonSet pod (one of them here) and,
// the part that differs from pod to pod, node affinity to one node by name.
func onNode(pod *corev1.Pod, node string) *corev1.Pod {
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: "node.kubernetes.io/unschedulable",
		Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}}}}
	return pod
}

// countingEngine is a policy.Engine that counts its evaluations.
type countingEngine struct {
	*policy.Engine
	mu    sync.Mutex
	calls int
}

func (e *countingEngine) Evaluate(ctx context.Context, in policy.Input) (policy.Decision, error) {
	e.mu.Lock()
	e.calls++
	e.mu.Unlock()
	return e.Engine.Evaluate(ctx, in)
}

// engineAt loads the default set with files added, on a fake clock.
func engineAt(t *testing.T, clock *clocktesting.FakePassiveClock, files map[string]string) *countingEngine {
	t.Helper()
	fsys := policytest.MapFS(t, files)
	e := policy.NewEngine(policy.Options{Clock: clock})
	if _, err := e.Load(context.Background(), policy.Source{FS: fsys, Name: t.Name()}); err != nil {
		t.Fatal(err)
	}
	return &countingEngine{Engine: e}
}

// TestMemoKeysTheGranuleOfTime: under a rule that reads input.now at a
// granularity of a minute, three pods of one template admitted 10 ms apart
// share one decision while in one minute, and the pod across the minute's
// boundary is decided afresh, with another answer. Under a set that does
// not read the time, an hour later is the same key.
func TestMemoKeysTheGranuleOfTime(t *testing.T) {
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 3, 4, 12, 0, 59, 980e6, time.UTC))
	eval := engineAt(t, clock, map[string]string{
		"now.rego": "package gpuadmit\n\nwarnings contains sprintf(\"decided at %s\", [time.format(input.now)])\n",
		"now.yaml": "gpuadmit:\n  config:\n    nowGranularity: 1m\n",
	})
	m := NewMutator(eval, StaticInventory{Inv: exampleInventory(t)}, MutatorOptions{})
	ns := teamA(t)["team-a"]
	var got [][]string
	for range 3 {
		got = append(got, decideOnce(t, m, Request{Pod: templatePod("p", nil, nil), Namespace: ns}).Warnings)
		clock.SetTime(clock.Now().Add(10 * time.Millisecond))
	}
	want := [][]string{{"decided at 2026-03-04T12:00:00Z"}, {"decided at 2026-03-04T12:00:00Z"}, {"decided at 2026-03-04T12:01:00Z"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("warnings of the three pods (-want +got)\n%s", diff)
	}
	if eval.calls != 2 {
		t.Errorf("the policy ran %d times for pods at 12:00:59.980, .990 and 12:01:00.000, want 2 (once per minute)", eval.calls)
	}

	timeless := engineAt(t, clock, nil)
	m = NewMutator(timeless, StaticInventory{Inv: exampleInventory(t)}, MutatorOptions{})
	decideOnce(t, m, Request{Pod: templatePod("p", nil, nil), Namespace: ns})
	clock.SetTime(clock.Now().Add(time.Hour))
	decideOnce(t, m, Request{Pod: templatePod("p", nil, nil), Namespace: ns})
	if timeless.calls != 1 {
		t.Errorf("a set that reads no time ran %d times for one template an hour apart, want once", timeless.calls)
	}
}
