package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"

	"github.com/gpuadmit/gpuadmit/internal/fakegpu"
	"github.com/gpuadmit/gpuadmit/pkg/agent/dra"
)

// Condition reason and event reason kube-controller-manager v1.37's
// device-taint eviction controller writes on a pod it evicts
// (pkg/controller/devicetainteviction): the DisruptionTarget condition's
// reason, and the reason of the event "Marking for deletion".
const (
	reasonDeviceTaintEviction = "DeletionByDeviceTaintManager"
	eventDeviceTaintEviction  = "DeviceTaintManagerEviction"
)

// evictionBound is how long a pod on a gone device may take to be gone:
// a rediscovery (--resync=2s), the slice update, the controller's eviction
// and the pod's grace period (1s), with room for a busy 2-core machine.
const evictionBound = 2 * time.Minute

// A GPU that falls off the bus (the fake NVML's control file) under a
// prepared claim is gone: the DRA driver keeps publishing its device, and
// only that one, with the NoExecute taint gpu.gpuadmit.io/gone, and the
// controller-manager's device-taint eviction controller evicts the pod of
// the claim (its DisruptionTarget condition and event name that
// controller) and deletes it within evictionBound: the pod does not hang
// on a GPU that is no longer there. A MIG instance deleted under a claim
// takes the same path: TestKubeletDRAVanishedMIGInstanceEvictsItsPod.
func TestKubeletDRALostGPUEvictsItsPod(t *testing.T) {
	n := requireNode(t)
	ctx := context.Background()
	gpus := newFakeGPUs(t, n, h100GPU, h100GPU)
	deployAgent(t, n, draMode.dir, draMode.name, draMode.labels, gpus, "--resync=2s")
	draMode.ready(ctx, t, n, gpus)
	tmpl := shareTemplate(t, n, h100MiB(t)/2+1)
	pod := claimPod("dra-on-lost-gpu", tmpl)
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	runPod(t, n, pod)
	i, _ := claimedGPU(ctx, t, n, pod)
	evicted := watchEviction(ctx, t, n, pod)

	if err := fakegpu.WriteControl(gpus.Control, fakegpu.Control{Lost: []string{gpus.UUIDs[i]}}); err != nil {
		t.Fatal(err)
	}
	what := fmt.Sprintf("GPU %d, held by pod %s's claim, was lost", i, pod.Name)
	waitDevices(ctx, t, n, "after "+what, map[string][]string{
		dra.GPUDeviceName(1 - i): nil,
		dra.GPUDeviceName(i):     {dra.TaintGone + ":" + string(resourceapi.DeviceTaintEffectNoExecute)},
	})
	evicted(what)
}

// watchEviction starts watching the pod, and returns what checks, once its
// device is gone (what says how), that the device-taint eviction
// controller evicts it within evictionBound of watchEviction's return:
// the pod is deleted with that controller's DisruptionTarget condition,
// and gets its event.
func watchEviction(ctx context.Context, t *testing.T, n *Node, pod *corev1.Pod) func(what string) {
	t.Helper()
	p, err := n.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uid := string(p.UID)
	// The API server ends a watch when it likes (its timeout, a restart of
	// the watch cache); a RetryWatcher resumes it from the last version
	// seen, so an ended watch is not mistaken for a pod that never went.
	sel := fields.OneTermEqualSelector("metadata.name", pod.Name).String()
	w, err := watchtools.NewRetryWatcherWithContext(ctx, p.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return n.Client.CoreV1().Pods(pod.Namespace).Watch(ctx, o)
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	start := time.Now()
	return func(what string) {
		t.Helper()
		cond := waitEvicted(t, w, pod.Name, what, start.Add(evictionBound))
		t.Logf("pod %s gone %s after %s; its condition: %s %s: %s", pod.Name, time.Since(start).Round(time.Second), what, cond.Type, cond.Reason, cond.Message)
		// The controller records its event asynchronously: it may land
		// after the deletion.
		var ev string
		for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
			if ev = podEvents(ctx, t, n, pod.Namespace, pod.Name, uid); strings.Contains(ev, eventDeviceTaintEviction) {
				return
			}
		}
		t.Errorf("pod %s has no %s event; its events:\n%s", pod.Name, eventDeviceTaintEviction, ev)
	}
}

// waitEvicted reads the pod's watch until it is deleted, at the latest
// by deadline, and returns the DisruptionTarget condition the device-taint
// eviction controller set on it first; it fails the test where the pod was
// deleted without that condition, or is still there at the deadline (what
// says what happened to its device).
func waitEvicted(t *testing.T, w watch.Interface, name, what string, deadline time.Time) corev1.PodCondition {
	t.Helper()
	var cond *corev1.PodCondition
	last := "no update"
	timeout := time.After(time.Until(deadline))
	for {
		select {
		case <-timeout:
			t.Fatalf("pod %s still there %s after %s (last: %s); DisruptionTarget condition: %+v", name, evictionBound, what, last, cond)
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch of pod %s ended before it was deleted (last: %s)", name, last)
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				continue
			}
			last = fmt.Sprintf("%s %s", ev.Type, podState(p))
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && cond == nil {
					cond = c.DeepCopy()
				}
			}
			if ev.Type != watch.Deleted {
				continue
			}
			if cond == nil || cond.Reason != reasonDeviceTaintEviction {
				t.Fatalf("pod %s was deleted without the device-taint eviction controller's DisruptionTarget condition (reason %s); got %+v", name, reasonDeviceTaintEviction, cond)
			}
			return *cond
		}
	}
}

// podEvents are the reasons and messages of the events about the pod with
// that UID, one a line.
func podEvents(ctx context.Context, t *testing.T, n *Node, ns, name, uid string) string {
	t.Helper()
	evs, err := n.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{"involvedObject.name": name, "involvedObject.uid": uid}.String()})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range evs.Items {
		fmt.Fprintf(&b, "%s %s: %s\n", e.Source.Component, e.Reason, e.Message)
	}
	return b.String()
}
