package replay

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// run creates the pods one by one in trace order, waits until every pod is
// bound or unschedulable, and reads back where they went.
func (r *replay) run(ctx context.Context) (Replayed, error) {
	res := Replayed{Config: r.s.config, SchedulerName: r.s.name}
	progress(r.o, "%s: creating %d pods in trace order", r.s.config, len(r.w.Pods))
	start := time.Now()
	denied, err := r.create(ctx)
	if err != nil {
		return res, err
	}
	res.CreateSeconds = time.Since(start).Seconds()
	progress(r.o, "%s: created in %.0fs; waiting for the scheduler", r.s.config, res.CreateSeconds)
	objs, err := r.settle(ctx, start, len(r.w.Pods)-denied)
	if err != nil {
		return res, err
	}
	if r.s.product {
		check, err := checkProduct(r.w.Pods, objs, r.s.name, !r.s.onePool)
		if err != nil {
			return res, fmt.Errorf("the product's path: %w", err)
		}
		check.Denied, check.WebhookRetries = denied, r.webhookRetries
		res.Product = &check
		progress(r.o, "%s: %d GPU pods admitted by the webhook (%d with DRA alternatives, %d on one pool, %d claim templates), %d denied",
			r.s.config, check.Admitted, check.Alternatives, check.OnePool, check.Templates, check.Denied)
	}
	res.SettleSeconds = time.Since(start).Seconds()
	if res.Timings, res.Scoring, err = r.scrape(ctx); err != nil {
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
	if r.s.product {
		// UsageTrace finds a pod's claim by the pod's name, as the bench
		// names the claims it creates; the webhook's claims are named by
		// the resourceclaim controller. Not computed on this path.
	} else if res.Usage, err = r.usageTrace(ctx, objs, claims.Items); err != nil {
		return res, fmt.Errorf("usage trace: %w", err)
	}
	progress(r.o, "%s: %d bound, %d pending in %.0fs; unallocated at 100%% arrived %.2f%%",
		r.s.config, res.Bound, res.Pending, res.SettleSeconds, res.At(1).UnallocatedPct)
	return res, nil
}

// create creates the pods one by one in trace order: as the bench writes
// them, or on the product's path as a user writes them (ProductPod), where
// a pod the webhook denies is counted and left out.
func (r *replay) create(ctx context.Context) (denied int, err error) {
	var pace *settled
	if r.o.MaxPending > 0 {
		if pace, err = watchSettled(ctx, r.cs); err != nil {
			return 0, err
		}
	}
	for i, p := range r.w.Pods {
		if pace != nil {
			if err := pace.waitBelow(ctx, i-denied, r.o.MaxPending); err != nil {
				return denied, err
			}
		}
		pod := Pod(PodName(i, p), r.s.name, p)
		if r.s.product {
			pod = ProductPod(PodName(i, p), r.s.name, p)
			pod.OwnerReferences = []metav1.OwnerReference{r.owner}
		}
		err := r.createPod(ctx, pod)
		switch {
		case err != nil && r.s.product && isDenial(err):
			if denied++; denied <= 5 {
				progress(r.o, "%s: pod %d denied: %v", r.s.config, i, err)
			}
		case err != nil:
			return denied, fmt.Errorf("create pod %d: %w", i, err)
		}
	}
	return denied, nil
}

// createPod creates pod; on the product's path it tries again, up to
// webhookTries times a second apart, where gpuadmit's webhook failed
// rather than decided (a policy evaluation over its time budget on a
// loaded machine), as the controller that owns a pod would.
func (r *replay) createPod(ctx context.Context, pod *corev1.Pod) error {
	for try := 1; ; try++ {
		_, err := r.cs.CoreV1().Pods(Namespace).Create(ctx, pod, metav1.CreateOptions{})
		if err == nil || !r.s.product || !apierrors.IsInternalError(err) || try == webhookTries {
			return err
		}
		r.webhookRetries++
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// webhookTries bounds the tries of one pod create on the product's path.
const webhookTries = 10

// settle waits until every one of the pods created is bound or marked
// unschedulable, twice in a row five seconds apart with the same number
// bound, and returns the pods.
func (r *replay) settle(ctx context.Context, start time.Time, created int) ([]corev1.Pod, error) {
	lastBound, lastLog := -1, time.Now()
	for {
		pods, err := r.cs.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		if len(pods.Items) < created {
			return nil, fmt.Errorf("%w: %d of the %d pods created are left; %s", errPodsGone, len(pods.Items), created, whyGone)
		}
		bound, unschedulable := outcomes(pods.Items)
		if bound+unschedulable == created && bound == lastBound {
			return pods.Items, nil
		}
		if bound+unschedulable == created {
			lastBound = bound
		} else {
			lastBound = -1
		}
		if time.Since(start) > r.o.Timeout {
			return nil, fmt.Errorf("%w: %d bound, %d unschedulable of %d after %s", errUnsettled, bound, unschedulable, created, r.o.Timeout)
		}
		if time.Since(lastLog) > 30*time.Second {
			progress(r.o, "%s: %d bound, %d unschedulable of %d", r.s.config, bound, unschedulable, created)
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
	for i := range pods {
		switch outcome(&pods[i]) {
		case podBound:
			bound++
		case podUnschedulable:
			unschedulable++
		}
	}
	return bound, unschedulable
}

// What the scheduler made of a pod so far.
const (
	podWaiting = iota
	podBound
	podUnschedulable
)

// outcome is whether p is bound, marked unschedulable, or neither yet.
func outcome(p *corev1.Pod) int {
	if p.Spec.NodeName != "" {
		return podBound
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return podUnschedulable
		}
	}
	return podWaiting
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
