package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gpuadmit/gpuadmit/pkg/agent/dra"
)

// The Scheduler tests run gpuadmit-scheduler (the scheduler module, built
// here, or $GPUADMIT_SCHEDULER_BIN) beside the stock kube-scheduler, with
// deploy/scheduler's profile, on kwok nodes whose DRA agent runs on fake NVML.

const gpuadmitScheduler = "gpuadmit-scheduler"

// useGPUAdmitScheduler runs gpuadmit-scheduler, leading, for one test
// (ownScheduler): its end and the record's return of every pool to the
// stock scheduler are the test's cleanup, so no test after it, in whatever
// order they run, finds its pools owned by a scheduler that bare pods may
// not use.
func useGPUAdmitScheduler(t *testing.T) {
	t.Helper()
	ownScheduler(t, context.Background(), gpuadmitScheduler, true)
}

var (
	schedulerBuildOnce sync.Once
	schedulerBin       string
	schedulerBuildErr  error
)

// gpuadmitSchedulerBin builds gpuadmit-scheduler once (or takes
// $GPUADMIT_SCHEDULER_BIN) and returns its path.
func gpuadmitSchedulerBin() (string, error) {
	schedulerBuildOnce.Do(func() {
		schedulerBin = os.Getenv("GPUADMIT_SCHEDULER_BIN")
		if schedulerBin != "" {
			return
		}
		schedulerBin = filepath.Join(env.LogDir, gpuadmitScheduler)
		build := exec.Command("go", "build", "-o", schedulerBin, "./cmd/gpuadmit-scheduler")
		build.Dir = filepath.Join(root, "scheduler")
		if out, err := build.CombinedOutput(); err != nil {
			schedulerBuildErr = fmt.Errorf("build: %w: %s", err, out)
		}
	})
	return schedulerBin, schedulerBuildErr
}

// shippedProfile is the KubeSchedulerConfiguration in deploy/scheduler's ConfigMap.
func shippedProfile() (map[string]any, error) {
	b, err := os.ReadFile(filepath.Join(root, "deploy/scheduler/config.yaml"))
	if err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{}
	if err := yaml.UnmarshalStrict(b, cm); err != nil {
		return nil, err
	}
	config := map[string]any{}
	return config, yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &config)
}

// scheduledBy has the pod scheduled by the scheduler called name, and
// gives it a CPU (NodeResourcesFit scores only what a pod requests).
func scheduledBy(name string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.SchedulerName = name
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: mustQuantity("1")}
	}
}

// TestSchedulerPacksWhereTheStockProfileSpreads: two nodes of two A100
// 40GB GPUs; a 30 GiB share holds GPU 0 of node x. Two 10 GiB shares
// follow. The best place for both is x: the first fills x's 10 GiB hole
// (where no 30 GiB share could ever go), the second starts x's idle GPU,
// and y stays idle for whatever comes. gpuadmit-scheduler puts both on x;
// the stock profile puts the first on y, the node with more CPU left.
func TestSchedulerPacksWhereTheStockProfileSpreads(t *testing.T) {
	useGPUAdmitScheduler(t)
	ctx := context.Background()
	ns := draNamespace(t, ctx, "sched-pack")
	for _, tc := range []struct {
		scheduler string
		check     func(nodes []string, x string) string
	}{
		{gpuadmitScheduler, func(nodes []string, x string) string {
			if nodes[0] != x || nodes[1] != x {
				return "want both on " + x
			}
			return ""
		}},
		{corev1.DefaultSchedulerName, func(nodes []string, x string) string {
			if nodes[0] == x {
				return "the stock profile put the first on " + x + " too; this case no longer tells packing from spreading"
			}
			return ""
		}},
	} {
		t.Run(tc.scheduler, func(t *testing.T) {
			group := "pack-" + tc.scheduler
			x, y := group+"-x", group+"-y"
			draNode(t, ctx, x, group, fakeGPUs(2), 2)
			draNode(t, ctx, y, group, fakeGPUs(2), 2)
			filler, err := createClaimPod(ctx, ns, group+"-filler", dra.ClassShare, 30, host(x), scheduledBy(tc.scheduler))
			if err != nil {
				t.Fatal(err)
			}
			waitState(t, ctx, filler, "node "+x)
			var nodes []string
			for i := range 2 {
				p, err := createClaimPod(ctx, ns, fmt.Sprintf("%s-%d", group, i), dra.ClassShare, 10, map[string]string{draLabel: group}, scheduledBy(tc.scheduler))
				if err != nil {
					t.Fatal(err)
				}
				waitFor(t, p.Name+" bound", 90*time.Second, func() (bool, string) {
					s := podState(ctx, p)
					return strings.HasPrefix(s, "node "), "state " + s
				})
				nodes = append(nodes, strings.TrimPrefix(podState(ctx, p), "node "))
			}
			if msg := tc.check(nodes, x); msg != "" {
				t.Errorf("%s placed the 10 GiB shares on %v: %s", tc.scheduler, nodes, msg)
			}
		})
	}
}

// TestSchedulerRefusesAShareThatFitsNoSingleGPU: a node whose two GPUs have
// 6 GiB left each has 12 GiB in all, but no room for 10 GiB on one GPU;
// gpuadmit-scheduler keeps the stock filters, so the pod stays
// unschedulable, refused by DRA's per-GPU allocation.
func TestSchedulerRefusesAShareThatFitsNoSingleGPU(t *testing.T) {
	useGPUAdmitScheduler(t)
	ctx := context.Background()
	ns := draNamespace(t, ctx, "sched-fit")
	draNode(t, ctx, "sched-fit-z", "sched-fit", fakeGPUs(2), 2)
	for i := range 2 {
		p, err := createClaimPod(ctx, ns, fmt.Sprintf("filler-%d", i), dra.ClassShare, 34, host("sched-fit-z"), scheduledBy(gpuadmitScheduler))
		if err != nil {
			t.Fatal(err)
		}
		waitState(t, ctx, p, "node sched-fit-z")
	}
	p, err := createClaimPod(ctx, ns, "ten", dra.ClassShare, 10, map[string]string{draLabel: "sched-fit"}, scheduledBy(gpuadmitScheduler))
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, ctx, p, "unschedulable")
	got := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
		t.Fatal(err)
	}
	for _, c := range got.Status.Conditions {
		if c.Type == corev1.PodScheduled && !strings.Contains(c.Message, "cannot allocate all claims") {
			t.Errorf("PodScheduled says %q; want DRA's refusal, cannot allocate all claims", c.Message)
		}
	}
}

// TestSchedulerOwnsThePoolsWhileItRuns: once gpuadmit-scheduler's leader
// holds its Lease, gpuadmit's webhook gives a GPU pod that names no
// scheduler to gpuadmit-scheduler (the pool's owner under the default
// policy), and gpuadmit-scheduler binds it.
func TestSchedulerOwnsThePoolsWhileItRuns(t *testing.T) {
	useGPUAdmitScheduler(t)
	ctx := context.Background()
	waitFor(t, "gpuadmit-scheduler's Lease", 60*time.Second, func() (bool, string) {
		l := &coordinationv1.Lease{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "gpuadmit-system", Name: gpuadmitScheduler}, l); err != nil {
			return false, err.Error()
		}
		return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", "no holder yet"
	})
	// The controller records the pools as gpuadmit-scheduler's once it sees
	// the Lease, and the webhook learns of the record through its
	// informer: ask in dry runs until it has.
	waitGivenTo(t, ctx, "team-a", nil, gpuadmitScheduler)
	// gpuadmit-scheduler gets only pods a controller creates again.
	d := gpuReplicaSet(t, ctx, "team-a", "owned-by-gpuadmit-scheduler", nil)
	p := replicaSetPods(t, ctx, d, 1)[0]
	if p.Spec.SchedulerName != gpuadmitScheduler {
		t.Fatalf("spec.schedulerName = %q, want %s", p.Spec.SchedulerName, gpuadmitScheduler)
	}
	node := scheduledNode(t, ctx, p)
	if !strings.Contains(p.Annotations["gpuadmit.io/decision"], "pool ") || node == "" {
		t.Errorf("the pod was not decided and bound: node %q, decision %q", node, p.Annotations["gpuadmit.io/decision"])
	}
}
