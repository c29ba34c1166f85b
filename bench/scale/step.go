package scale

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuadmit/gpuadmit/bench/admission"
)

// step grows the fleet to n nodes and measures it: memory with the nodes
// in, rebuild time, the four phases, memory with the phases' pods in.
func (b *bench) step(ctx context.Context, n int) (Step, error) {
	st := Step{Nodes: n}
	for _, gn := range b.fleet[:n] {
		if gn.gpus != nil {
			st.DRANodes++
			st.Slices += len(gn.slices)
		}
	}
	start := time.Now()
	if err := b.addNodes(ctx, n); err != nil {
		return st, err
	}
	st.AddSeconds = time.Since(start).Seconds()
	if err := b.settle(ctx, n); err != nil {
		return st, err
	}
	var err error
	if st.AfterNodes, err = b.proc.memory(ctx); err != nil {
		return st, err
	}
	b.progress("%d nodes: RSS %.0f MB, heap %.0f MB, cache %v", n, st.AfterNodes.RSSMB, st.AfterNodes.HeapMB, st.AfterNodes.Cache)
	if st.Rebuild, err = b.probeRebuilds(ctx); err != nil {
		return st, err
	}
	b.progress("%d nodes: %d rebuilds, mean %.1f ms", n, int(st.Rebuild.Count), st.Rebuild.MeanMs)
	// Warm the webhook's code paths (a replica serves for long before any
	// step measures) with dry-run pods all different, so no template pod
	// is in the memo before its phase.
	// A warm-up pod may fail as a measured one may (the policy's budget
	// passed on a starved machine): counted, not fatal.
	warm := admission.Load{Namespace: Namespace, Prefix: fmt.Sprintf("warmup-%d", n), Mix: admission.MixDistinct, Pods: 4 * len(b.clients),
		Clients: b.clients, DryRun: true}.Run(ctx)
	st.WarmupErrors = len(warm.Errors)
	for _, ph := range []struct {
		mix   admission.Mix
		churn bool
	}{{admission.MixTemplate, false}, {admission.MixTemplate, true}, {admission.MixDistinct, false}, {admission.MixDistinct, true}} {
		p, err := b.phase(ctx, n, ph.mix, ph.churn)
		st.Phases = append(st.Phases, p)
		if err != nil {
			return st, err
		}
		if ph.churn {
			if st.ChurnedNodes, err = b.churned(ctx); err != nil {
				return st, err
			}
		}
	}
	if st.AfterPods, err = b.proc.memory(ctx); err != nil {
		return st, err
	}
	b.progress("%d nodes, %d pods: RSS %.0f MB (peak %.0f), heap %.0f MB", n, b.pods, st.AfterPods.RSSMB, st.AfterPods.PeakRSSMB, st.AfterPods.HeapMB)
	return st, nil
}

// settle waits until the webhook's cache holds the n nodes and its
// inventory stopped rebuilding (no rebuild for three seconds).
func (b *bench) settle(ctx context.Context, n int) error {
	last, quiet := -1.0, 0
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		m, err := admission.ScrapeMetrics(ctx, b.proc.metrics)
		if err != nil {
			return err
		}
		r := m.Value(metricRebuilds, nil)
		if m.Value(metricCacheObjects, map[string]string{"kind": "Node"}) >= float64(n) && r == last {
			if quiet++; quiet >= 3 {
				return nil
			}
		} else {
			quiet = 0
		}
		last = r
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return fmt.Errorf("the webhook's cache did not hold %d nodes, its inventory settled, within 10 minutes", n)
}

// probeTaint is the taint the rebuild probe adds and removes: a change of
// what the inventory reads, so each is one background rebuild.
var probeTaint = corev1.Taint{Key: "bench.gpuadmit.io/probe", Effect: corev1.TaintEffectNoSchedule}

// probeRebuilds adds and removes a taint on the first node, opts.Probes
// changes in all, each after the last one's rebuild, and reads how long
// the rebuilds took from the webhook's histogram.
func (b *bench) probeRebuilds(ctx context.Context) (Rebuild, error) {
	node := b.fleet[0].node
	before, err := admission.ScrapeMetrics(ctx, b.proc.metrics)
	if err != nil {
		return Rebuild{}, err
	}
	for i := range b.opts.Probes {
		taints := node.Spec.Taints
		if i%2 == 0 {
			taints = append(append([]corev1.Taint(nil), taints...), probeTaint)
		}
		if err := b.patchNode(ctx, node.Name, map[string]any{"spec": map[string]any{"taints": taints}}); err != nil {
			return Rebuild{}, err
		}
		if err := b.waitRebuilds(ctx, before.Value(metricRebuilds, nil)+float64(i+1)); err != nil {
			return Rebuild{}, fmt.Errorf("rebuild probe %d: %w", i, err)
		}
	}
	after, err := admission.ScrapeMetrics(ctx, b.proc.metrics)
	if err != nil {
		return Rebuild{}, err
	}
	h := after.Histogram(metricRebuildSeconds, nil).Sub(before.Histogram(metricRebuildSeconds, nil))
	r := Rebuild{Count: h.Count, Changes: b.opts.Probes}
	if h.Count > 0 {
		r.MeanMs = 1000 * h.Sum / h.Count
		r.MaxBucketMs = 1000 * h.Bound(1)
	}
	return r, nil
}

// waitRebuilds waits until the webhook counted at least want rebuilds.
func (b *bench) waitRebuilds(ctx context.Context, want float64) error {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		m, err := admission.ScrapeMetrics(ctx, b.proc.metrics)
		if err != nil {
			return err
		}
		if m.Value(metricRebuilds, nil) >= want {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return errors.New("no rebuild within a minute of a taint change")
}

func (b *bench) patchNode(ctx context.Context, name string, patch map[string]any) error {
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = b.cs.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("patch node %s: %w", name, err)
	}
	return nil
}

// churned counts the nodes whose GFD timestamp churn has rewritten: a
// check that churn reached the API server, not only that it ran.
func (b *bench) churned(ctx context.Context) (int, error) {
	var n int
	opts := metav1.ListOptions{Limit: 500}
	for {
		l, err := b.cs.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return 0, err
		}
		for _, node := range l.Items {
			if v := node.Labels[LabelTimestamp]; v != "" && v != initialTimestamp {
				n++
			}
		}
		if opts.Continue = l.Continue; opts.Continue == "" {
			return n, nil
		}
	}
}
