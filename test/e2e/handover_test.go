package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpuadmit/gpuadmit/pkg/handover"
	"github.com/gpuadmit/gpuadmit/pkg/mutate"
	"github.com/gpuadmit/gpuadmit/test/e2e/cluster"
)

// The handover tests run their own gpuadmit-scheduler processes (the
// shipped profile, leader election on its Lease gpuadmit-system/
// gpuadmit-scheduler) and take them away: they must run before the
// Scheduler tests start the package's shared one, which file order gives.

// leaseDuration is the shipped profile's (kube-scheduler's default), and
// handoverBound what pkg/handover promises on top of it: the reconciler's
// look when the Lease falls due, Tick, the controllers' new pods and the
// stock scheduler's binding; docs/scheduler.md states it.
const (
	leaseDuration = 15 * time.Second
	handoverBound = 15 * time.Second
)

// TestGateSchedulerUninstalledWithPodsPendingForIt: gpuadmit-scheduler
// hangs (SIGSTOP: it holds its Lease but schedules nothing) while a
// ReplicaSet's GPU pods are admitted to it, then is uninstalled: its
// process killed and its Lease deleted. spec.schedulerName cannot change;
// the controller deletes the pods that wait for it, the ReplicaSet creates
// them again, the webhook gives them the stock scheduler, which binds them,
// within the bound. At every poll, the pending pods of the pool name one
// scheduler, and no node holds more GPUs than it has.
func TestGateSchedulerUninstalledWithPodsPendingForIt(t *testing.T) {
	ctx := context.Background()
	const pool = "gate-uninstall"
	ns := plainNamespace(t, ctx, pool)
	wholePool(t, ctx, pool, 2)
	sched := ownScheduler(t, ctx, "gpuadmit-scheduler-uninstall", true)
	sel := map[string]string{"gpuadmit.io/pool": pool}
	waitGivenTo(t, ctx, ns, sel, gpuadmitScheduler)

	if err := sched.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	check := watchPools(t, ctx, ns)
	d := gpuReplicaSet(t, ctx, ns, "trainer", sel, 6)
	for _, p := range replicaSetPods(t, ctx, d, 6) {
		if p.Spec.SchedulerName != gpuadmitScheduler {
			t.Fatalf("pod %s: spec.schedulerName %q, want %s (the record still gives it the pool)", p.Name, p.Spec.SchedulerName, gpuadmitScheduler)
		}
	}
	time.Sleep(2 * time.Second)
	if n := boundPods(t, ctx, d, ""); n != 0 {
		t.Fatalf("%d pods bound by a frozen gpuadmit-scheduler", n)
	}

	uninstalled := time.Now()
	sched.Kill()
	deleteSchedulerLease(t, ctx)
	waitFor(t, "the 6 replicas bound by the stock scheduler", handoverBound, func() (bool, string) {
		n := boundPods(t, ctx, d, corev1.DefaultSchedulerName)
		return n == 6, fmt.Sprintf("%d of 6 bound by default-scheduler; pods: %s", n, podSummary(t, ctx, d))
	})
	t.Logf("uninstalled with 6 pods pending for it: all 6 bound by default-scheduler %s later", time.Since(uninstalled).Round(100*time.Millisecond))
	check()
	waitReplacedEvent(t, ctx, ns)
}

// TestGateSchedulerLeaderKilledMidBurst: a ReplicaSet scales up one GPU
// pod a second while gpuadmit-scheduler's leader, its only replica, is
// killed (SIGKILL: no Lease released) six seconds in, and a new replica
// starts eighteen seconds later, as its Deployment would start one. The
// pods admitted to it after the kill wait until its Lease expires by the
// controller's clock, and are then replaced and bound by the stock
// scheduler; the pool returns to gpuadmit-scheduler once the new replica
// holds the Lease (it too waits one lease duration from when it first sees
// the dead leader's record, as client-go does) and no stock pod waits there. At every poll the pending
// pods of the pool name one scheduler, none waits for gpuadmit-scheduler
// longer than the lease duration and the bound, no node holds more GPUs
// than it has, and every replica ends bound.
func TestGateSchedulerLeaderKilledMidBurst(t *testing.T) {
	ctx := context.Background()
	const pool = "gate-burst"
	ns := plainNamespace(t, ctx, pool)
	wholePool(t, ctx, pool, 4)
	leader := ownScheduler(t, ctx, "gpuadmit-scheduler-leader", true)
	sel := map[string]string{"gpuadmit.io/pool": pool}
	waitGivenTo(t, ctx, ns, sel, gpuadmitScheduler)

	check := watchPools(t, ctx, ns)
	d := gpuReplicaSet(t, ctx, ns, "burst", sel, 0)
	const total = 30
	for i := 1; i <= total; i++ {
		scale(t, ctx, d, i)
		switch i {
		case 6:
			leader.Kill()
			t.Logf("killed the leader with %d replicas asked", i)
		case 24:
			ownScheduler(t, ctx, "gpuadmit-scheduler-restarted", false)
			t.Logf("started a new replica with %d replicas asked", i)
		}
		time.Sleep(time.Second)
	}
	burstEnd := time.Now()
	waitFor(t, fmt.Sprintf("the %d replicas bound", total), leaseDuration+handoverBound, func() (bool, string) {
		n := boundPods(t, ctx, d, "")
		return n == total, fmt.Sprintf("%d of %d bound; pods: %s", n, total, podSummary(t, ctx, d))
	})
	by := boundBy(t, ctx, d)
	t.Logf("all %d bound %s after the last scale-up; by scheduler: %v", total, time.Since(burstEnd).Round(100*time.Millisecond), by)
	if by[corev1.DefaultSchedulerName] == 0 {
		t.Errorf("no pod bound by default-scheduler while gpuadmit-scheduler was gone: %v", by)
	}
	// No stock pod waits now: the pool goes back to the new replica.
	waitGivenTo(t, ctx, ns, sel, gpuadmitScheduler)
	check()
}

// TestGateSchedulerHandoverPowers: the controller's account, under
// deploy/base's RBAC and admission policy, may delete a pod only where it
// waits for gpuadmit-scheduler with a controller owner (the running
// controller does, as that account, in the tests above), and write no
// ConfigMap but the record: a pod of the stock scheduler and another
// ConfigMap of its own namespace are refused by the policy, a ConfigMap
// elsewhere by RBAC.
func TestGateSchedulerHandoverPowers(t *testing.T) {
	ctx := context.Background()
	ns := plainNamespace(t, ctx, "gate-handover-powers")
	controller := accountClient(t, controllerAccount)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stock", Labels: map[string]string{mutate.LabelManaged: "true"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the controller policy refuses the stock scheduler's pod", 30*time.Second, func() (bool, string) {
		err := controller.Delete(ctx, p.DeepCopy(), client.DryRunAll)
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), controllerOnly+" pods it replaces"), "dry-run delete: " + errString(err)
	})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "gpuadmit-system", Name: "not-the-record", Labels: map[string]string{"app.kubernetes.io/managed-by": "gpuadmit"}}}
	refusedBy(t, "another ConfigMap in gpuadmit-system", controller.Create(ctx, cm, client.DryRunAll), controllerOnly+" the ConfigMap gpuadmit-scheduler-pools")
	elsewhere := cm.DeepCopy()
	elsewhere.Namespace, elsewhere.Name = ns, handover.ConfigMapName
	refusedBy(t, "the record's name in another namespace", controller.Create(ctx, elsewhere, client.DryRunAll), rbacDenial)
}

// plainNamespace creates a namespace for one test and deletes it after.
func plainNamespace(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	return name
}

// wholePool adds n kwok nodes of 8 whole A100 80GB GPUs each, as the pool
// named pool (label gpuadmit.io/pool), and removes them after the test.
func wholePool(t *testing.T, ctx context.Context, pool string, n int) {
	t.Helper()
	for i := range n {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", pool, i), Labels: map[string]string{
			"gpuadmit.io/pool": pool, "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
			"nvidia.com/gpu.count": "8", "nvidia.com/gpu.memory": "81920",
		}}}
		node.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}
		res := corev1.ResourceList{corev1.ResourceCPU: mustQuantity("128"), corev1.ResourceMemory: mustQuantity("1Ti"), corev1.ResourcePods: mustQuantity("110"),
			"nvidia.com/gpu": mustQuantity("8"), "gpuadmit.io/gpu-memory-mib": mustQuantity("655360"), "gpuadmit.io/a100-80gb-mib": mustQuantity("655360")}
		node.Status.Allocatable, node.Status.Capacity = res, res
		if err := env.AddNode(ctx, node); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node) })
	}
}

// ownScheduler starts a gpuadmit-scheduler replica with the shipped
// profile; lead waits until a replica holds the Lease (so the first one
// started leads). Its end (kill, then the Lease deleted) and the record's
// return to the stock scheduler are the test's cleanup, so the tests after
// see the stock scheduler own the pools.
func ownScheduler(t *testing.T, ctx context.Context, name string, lead bool) *cluster.Proc {
	t.Helper()
	if lead && schedulerLeaseHolder(ctx) != "" {
		t.Fatalf("gpuadmit-scheduler's Lease is held before this test starts one (by %q): the handover tests must run before the Scheduler tests", schedulerLeaseHolder(ctx))
	}
	bin, err := gpuadmitSchedulerBin()
	if err != nil {
		t.Fatal(err)
	}
	config, err := shippedProfile()
	if err != nil {
		t.Fatal(err)
	}
	p, err := env.StartSchedulerProc(bin, name, "system:serviceaccount:gpuadmit-system:gpuadmit-scheduler", config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		deleteSchedulerLease(t, context.Background())
		waitStockRecord(t)
	})
	if lead {
		waitFor(t, name+" holds the Lease", 60*time.Second, func() (bool, string) {
			h := schedulerLeaseHolder(ctx)
			return h != "", "no holder yet"
		})
	}
	return p
}

func schedulerLeaseHolder(ctx context.Context) string {
	l := &coordinationv1.Lease{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "gpuadmit-system", Name: gpuadmitScheduler}, l); err != nil {
		return ""
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

func deleteSchedulerLease(t *testing.T, ctx context.Context) {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "gpuadmit-system", Name: gpuadmitScheduler}}
	if err := env.Client.Delete(ctx, l); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete gpuadmit-scheduler's Lease: %v", err)
	}
}

// waitStockRecord waits until the controller's record gives every pool to
// the stock scheduler.
func waitStockRecord(t *testing.T) {
	waitFor(t, "the record gives every pool to the stock scheduler", leaseDuration+handoverBound, func() (bool, string) {
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: "gpuadmit-system", Name: handover.ConfigMapName}, cm); err != nil {
			return false, err.Error()
		}
		o, err := handover.Parse(cm.Data)
		if err != nil {
			return false, err.Error()
		}
		return o.Equal(handover.Owners{}), "record " + o.String()
	})
}

// waitGivenTo asks in dry runs, with a controlled pod on the pool sel
// selects (nil: any pool), until the webhook gives it scheduler.
func waitGivenTo(t *testing.T, ctx context.Context, ns string, sel map[string]string, scheduler string) {
	t.Helper()
	probe := gpuPod(ns, "probe", map[string]string{"nvidia.com/gpu": "1"})
	probe.Spec.NodeSelector = sel
	probe.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "probe", UID: "probe", Controller: ptr.To(true)}}
	waitFor(t, "the webhook gives a controlled pod to "+scheduler, leaseDuration+handoverBound, func() (bool, string) {
		p := probe.DeepCopy()
		if err := env.Client.Create(ctx, p, client.DryRunAll); err != nil {
			return false, err.Error()
		}
		return p.Spec.SchedulerName == scheduler, "spec.schedulerName " + p.Spec.SchedulerName
	})
}

// gpuReplicaSet creates a ReplicaSet (what a Deployment's pods belong to;
// the test cluster runs no Deployment controller) of replicas pods of one whole GPU
// each, on the nodes sel selects, deleted (pods first) after the test.
func gpuReplicaSet(t *testing.T, ctx context.Context, ns, name string, sel map[string]string, replicas ...int32) *appsv1.ReplicaSet {
	t.Helper()
	n := int32(1)
	if len(replicas) > 0 {
		n = replicas[0]
	}
	labels := map[string]string{"gate": name}
	pod := gpuPod(ns, "", map[string]string{"nvidia.com/gpu": "1"})
	pod.Labels = labels
	pod.Spec.NodeSelector = sel
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
	d := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: appsv1.ReplicaSetSpec{
		Replicas: &n, Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod.Spec},
	}}
	if err := env.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = env.Client.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationBackground))
		waitFor(t, "the pods of "+name+" gone", 60*time.Second, func() (bool, string) {
			pods := listPods(t, ctx, d)
			for i := range pods {
				_ = env.Client.Delete(ctx, &pods[i], client.GracePeriodSeconds(0))
			}
			return len(pods) == 0, fmt.Sprintf("%d left", len(pods))
		})
	})
	return d
}

func scale(t *testing.T, ctx context.Context, d *appsv1.ReplicaSet, n int) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)))
	if err := env.Client.Patch(ctx, d.DeepCopy(), patch); err != nil {
		t.Fatalf("scale %s to %d: %v", d.Name, n, err)
	}
}

func listPods(t *testing.T, ctx context.Context, d *appsv1.ReplicaSet) []corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(d.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// replicaSetPods waits for n pods of d not being deleted and returns them.
func replicaSetPods(t *testing.T, ctx context.Context, d *appsv1.ReplicaSet, n int) []*corev1.Pod {
	t.Helper()
	var out []*corev1.Pod
	waitFor(t, fmt.Sprintf("%d pods of %s", n, d.Name), 60*time.Second, func() (bool, string) {
		out = out[:0]
		for _, p := range listPods(t, ctx, d) {
			if p.DeletionTimestamp == nil {
				out = append(out, p.DeepCopy())
			}
		}
		return len(out) == n, fmt.Sprintf("%d pods", len(out))
	})
	return out
}

// boundPods counts d's pods bound to a node and not being deleted, by
// scheduler ("" any).
func boundPods(t *testing.T, ctx context.Context, d *appsv1.ReplicaSet, scheduler string) int {
	n := 0
	for _, p := range listPods(t, ctx, d) {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && (scheduler == "" || p.Spec.SchedulerName == scheduler) {
			n++
		}
	}
	return n
}

func boundBy(t *testing.T, ctx context.Context, d *appsv1.ReplicaSet) map[string]int {
	by := map[string]int{}
	for _, p := range listPods(t, ctx, d) {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			by[p.Spec.SchedulerName]++
		}
	}
	return by
}

func podSummary(t *testing.T, ctx context.Context, d *appsv1.ReplicaSet) string {
	var parts []string
	for _, p := range listPods(t, ctx, d) {
		parts = append(parts, fmt.Sprintf("%s(%s node=%q deleting=%v)", p.Name, p.Spec.SchedulerName, p.Spec.NodeName, p.DeletionTimestamp != nil))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// watchPools polls ns every 100ms until the returned check is called, which
// fails the test with what it saw wrong: two schedulers named by the
// pending pods of one pool, a pod waiting for gpuadmit-scheduler longer
// than the lease duration and the bound, a node holding more
// nvidia.com/gpu than it has, a pod that failed (UnexpectedAdmissionError,
// a refused Prepare).
func watchPools(t *testing.T, ctx context.Context, ns string) (check func()) {
	t.Helper()
	var (
		mu      sync.Mutex
		bad     []string
		polls   int
		since   = map[types.UID]time.Time{} // first seen waiting for gpuadmit-scheduler
		longest time.Duration
	)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			pods := &corev1.PodList{}
			if err := env.Client.List(ctx, pods, client.InNamespace(ns)); err != nil {
				continue
			}
			msgs := poolViolations(ctx, pods.Items)
			now := time.Now()
			mu.Lock()
			for _, p := range pods.Items {
				if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || p.Spec.SchedulerName != gpuadmitScheduler {
					delete(since, p.UID)
					continue
				}
				if _, ok := since[p.UID]; !ok {
					since[p.UID] = now
				}
				if w := now.Sub(since[p.UID]); w > longest {
					longest = w
				}
				if w := now.Sub(since[p.UID]); w > leaseDuration+handoverBound {
					msgs = append(msgs, fmt.Sprintf("pod %s waits for gpuadmit-scheduler for %s, over the lease duration and the bound (%s)", p.Name, w.Round(100*time.Millisecond), leaseDuration+handoverBound))
				}
			}
			polls++
			if len(msgs) > 0 && len(bad) < 20 {
				bad = append(bad, fmt.Sprintf("poll %d at %s: %s", polls, time.Now().Format("15:04:05.000"), strings.Join(msgs, "; ")))
			}
			mu.Unlock()
		}
	}()
	var once sync.Once
	check = func() {
		t.Helper()
		once.Do(func() {
			close(stop)
			<-done
			mu.Lock()
			defer mu.Unlock()
			if polls < 10 {
				t.Errorf("only %d polls of the pools", polls)
			}
			for _, b := range bad {
				t.Error(b)
			}
			t.Logf("%d polls of the pools, %d with a violation; the longest wait for gpuadmit-scheduler %s", polls, len(bad), longest.Round(100*time.Millisecond))
		})
	}
	t.Cleanup(check)
	return check
}

// poolViolations says what is wrong in one listing of pods.
func poolViolations(ctx context.Context, pods []corev1.Pod) []string {
	var msgs []string
	waiting := map[string]map[string][]string{} // pool → scheduler → pods
	held := map[string]int64{}
	for _, p := range pods {
		if p.Status.Phase == corev1.PodFailed || p.Status.Reason == "UnexpectedAdmissionError" {
			msgs = append(msgs, fmt.Sprintf("pod %s failed: %s %s", p.Name, p.Status.Reason, p.Status.Message))
		}
		if p.DeletionTimestamp != nil {
			continue
		}
		if p.Spec.NodeName != "" {
			for _, c := range p.Spec.Containers {
				q := c.Resources.Limits["nvidia.com/gpu"]
				held[p.Spec.NodeName] += q.Value()
			}
			continue
		}
		pool := mutate.PoolOf(&p)
		if waiting[pool] == nil {
			waiting[pool] = map[string][]string{}
		}
		waiting[pool][p.Spec.SchedulerName] = append(waiting[pool][p.Spec.SchedulerName], p.Name)
	}
	for pool, by := range waiting {
		if len(by) > 1 {
			msgs = append(msgs, fmt.Sprintf("pool %q has pods pending for %d schedulers: %v", pool, len(by), by))
		}
	}
	for node, n := range held {
		nd := &corev1.Node{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: node}, nd); err != nil {
			continue
		}
		if have := nd.Status.Allocatable.Name("nvidia.com/gpu", "DecimalSI").Value(); n > have {
			msgs = append(msgs, fmt.Sprintf("node %s holds %d nvidia.com/gpu of %d", node, n, have))
		}
	}
	return msgs
}

// waitReplacedEvent waits for an Event in ns that says a pod was deleted
// because gpuadmit-scheduler is gone.
func waitReplacedEvent(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	waitFor(t, "a "+handover.ReasonReplaced+" Event", 10*time.Second, func() (bool, string) {
		evs := &corev1.EventList{}
		if err := env.Client.List(ctx, evs, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Reason == handover.ReasonReplaced && strings.Contains(e.Message, "holds no live Lease") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d Events, none %s", len(evs.Items), handover.ReasonReplaced)
	})
}
