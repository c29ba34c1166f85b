package replay

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// run creates the pods one by one in trace order, waits until every pod is
// bound or unschedulable, and reads back where they went.
func (r *replay) run(ctx context.Context) (Replayed, error) {
	res := Replayed{Config: r.s.config, SchedulerName: r.s.name}
	progress(r.o, "%s: creating %d pods in trace order", r.s.config, len(r.w.Pods))
	start := time.Now()
	for i, p := range r.w.Pods {
		if _, err := r.cs.CoreV1().Pods(Namespace).Create(ctx, Pod(PodName(i, p), r.s.name, p), metav1.CreateOptions{}); err != nil {
			return res, fmt.Errorf("create pod %d: %w", i, err)
		}
	}
	res.CreateSeconds = time.Since(start).Seconds()
	progress(r.o, "%s: created in %.0fs; waiting for the scheduler", r.s.config, res.CreateSeconds)
	objs, err := r.settle(ctx, start)
	if err != nil {
		return res, err
	}
	res.SettleSeconds = time.Since(start).Seconds()
	if res.Timings, err = r.scrape(ctx); err != nil {
		return res, fmt.Errorf("scrape the scheduler: %w", err)
	}
	claims, err := r.cs.ResourceV1().ResourceClaims(Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return res, err
	}
	placed, err := Placements(r.w.Pods, objs, claims.Items)
	if err != nil {
		return res, err
	}
	if res.Points, res.Bound, res.Pending, err = Account(r.w.Nodes, r.w.Pods, placed, Arrived()); err != nil {
		return res, err
	}
	res.Placements = placed
	if res.Usage, err = r.usageTrace(ctx, objs, claims.Items); err != nil {
		return res, fmt.Errorf("usage trace: %w", err)
	}
	progress(r.o, "%s: %d bound, %d pending in %.0fs; unallocated at 100%% arrived %.2f%%",
		r.s.config, res.Bound, res.Pending, res.SettleSeconds, res.At(1).UnallocatedPct)
	return res, nil
}

// settle waits until every pod is bound or marked unschedulable, twice in a
// row five seconds apart with the same number bound, and returns the pods.
func (r *replay) settle(ctx context.Context, start time.Time) ([]corev1.Pod, error) {
	lastBound, lastLog := -1, time.Now()
	for {
		pods, err := r.cs.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		bound, unschedulable := outcomes(pods.Items)
		if bound+unschedulable == len(r.w.Pods) && bound == lastBound {
			return pods.Items, nil
		}
		if bound+unschedulable == len(r.w.Pods) {
			lastBound = bound
		} else {
			lastBound = -1
		}
		if time.Since(start) > r.o.Timeout {
			return nil, fmt.Errorf("%w: %d bound, %d unschedulable of %d after %s", errUnsettled, bound, unschedulable, len(r.w.Pods), r.o.Timeout)
		}
		if time.Since(lastLog) > 30*time.Second {
			progress(r.o, "%s: %d bound, %d unschedulable of %d", r.s.config, bound, unschedulable, len(r.w.Pods))
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Second):
		}
	}
}

// outcomes counts the pods bound and those the scheduler found no node for.
func outcomes(pods []corev1.Pod) (bound, unschedulable int) {
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			bound++
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				unschedulable++
				break
			}
		}
	}
	return bound, unschedulable
}

// usageTrace reads the nodes and slices back and computes gpuadmit's usage
// figures over the arrival of the pods (UsageTrace), with the trace's pod
// list as the typical sizes.
func (r *replay) usageTrace(ctx context.Context, pods []corev1.Pod, claims []resourceapi.ResourceClaim) ([]UsagePoint, error) {
	nodes, err := r.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	slices, err := r.cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	start := time.Now()
	c := Cluster{Nodes: nodes.Items, Slices: slices.Items, Pods: pods, Claims: claims}
	u, err := UsageTrace(r.w, c, UsageOptions{Sizes: TypicalSizes(r.w.Listed), PolicySizes: PolicySizes()})
	if err == nil && len(u) > 0 {
		last := u[len(u)-1]
		progress(r.o, "%s: usage trace of %d points in %.0fs; at 100%% arrived stranded %.2f%% of capacity (%.2f%% counting the pods without GPU, %.2f%% with the policy's sizes), fragmentation %.2f%%",
			r.s.config, len(u), time.Since(start).Seconds(), last.StrandedPct(), pct(last.StrandedAllPodsMiB, last.CapacityMiB),
			pct(last.StrandedPolicySizesMiB, last.CapacityMiB), last.FragmentationPct())
	}
	return u, err
}
