package webhook

import (
	"context"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
	"github.com/gpuadmit/gpuadmit/pkg/quota"
	"github.com/gpuadmit/gpuadmit/pkg/usage"
)

// addUsage exports where the GPUs go (pkg/usage) from the reconcilers'
// leader: the one replica that runs them, so every series comes from one
// process. It follows Nodes (an inventory of its own, without Events: the
// serving replicas report refused nodes), gpuadmit's pods, the
// ResourceQuotas and, where the cluster has DRA, ResourceSlices and
// ResourceClaims, which name the GPU each claim holds.
func addUsage(ctx context.Context, mgr manager.Manager, engine *policy.Engine, log logr.Logger) error {
	c := mgr.GetCache()
	live := inventory.NewLive(c, allocator.Default(), log.WithName("inventory"))
	if err := follow(ctx, mgr, &corev1.Node{}, live.Handler()); err != nil {
		return err
	}
	if err := mgr.Add(onLeader{live}); err != nil { // only the leader reports usage
		return err
	}
	src := &usageSource{cache: c, live: live, engine: engine}
	dra, err := servesDRA(mgr)
	if err != nil {
		return err
	}
	if dra {
		if err := addSlices(ctx, mgr, live, log); err != nil {
			return err
		}
		if _, err := c.GetInformer(ctx, &resourceapi.ResourceClaim{}); err != nil {
			return fmt.Errorf("resourceclaim informer: %w", err)
		}
		src.dra = true
	}
	for _, obj := range []client.Object{&corev1.Pod{}, &corev1.ResourceQuota{}} {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("%T informer: %w", obj, err)
		}
	}
	col := usage.NewCollector(src, usage.CollectorOptions{}, log.WithName("usage"))
	usageExported.add(col)
	go func() {
		<-ctx.Done()
		usageExported.remove(col)
	}()
	return mgr.Add(col)
}

// onLeader runs a Runnable on the leader only.
type onLeader struct{ manager.Runnable }

// NeedLeaderElection is true.
func (onLeader) NeedLeaderElection() bool { return true }

// usageExported is the registry's one collector of the usage series: a
// process may Run more than once (the end-to-end tests do), and each Run's
// collector joins it while the Run lasts, exporting only while that Run leads.
var usageExported = &usageExport{cs: map[*usage.Collector]bool{}}

func init() { metrics.Registry.MustRegister(usageExported) }

type usageExport struct {
	mu sync.Mutex
	cs map[*usage.Collector]bool
}

func (u *usageExport) add(c *usage.Collector) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.cs[c] = true
}

func (u *usageExport) remove(c *usage.Collector) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.cs, c)
}

// Describe sends the usage series' descriptions, whichever Runs last.
func (u *usageExport) Describe(ch chan<- *prometheus.Desc) { usage.Describe(ch) }

// Collect sends the series of each Run's collector (none from a Run that
// does not lead).
func (u *usageExport) Collect(ch chan<- prometheus.Metric) {
	u.mu.Lock()
	cs := make([]*usage.Collector, 0, len(u.cs))
	for c := range u.cs {
		cs = append(cs, c)
	}
	u.mu.Unlock()
	for _, c := range cs {
		c.Collect(ch)
	}
}

// usageSource reads usage.Input from the manager's cache.
type usageSource struct {
	cache  client.Reader
	live   *inventory.Live
	engine *policy.Engine
	dra    bool
}

var _ usage.Source = (*usageSource)(nil)

// Input lists what the cache holds. Nothing is changed, so the lists share
// the cache's objects rather than copy them.
func (s *usageSource) Input(ctx context.Context) (usage.Input, error) {
	in := usage.Input{Inventory: s.live.Inventory()}
	var nodes corev1.NodeList
	var pods corev1.PodList
	var rqs corev1.ResourceQuotaList
	for _, l := range []client.ObjectList{&nodes, &pods, &rqs} {
		if err := s.cache.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
			return usage.Input{}, fmt.Errorf("list %T: %w", l, err)
		}
	}
	in.Nodes = nodes.Items
	for i := range pods.Items {
		in.Pods = append(in.Pods, &pods.Items[i])
	}
	for _, rq := range rqs.Items {
		if rq.Name == quota.Name {
			in.Quotas = append(in.Quotas, rq)
		}
	}
	if s.dra {
		var slices resourceapi.ResourceSliceList
		var claims resourceapi.ResourceClaimList
		for _, l := range []client.ObjectList{&slices, &claims} {
			if err := s.cache.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
				return usage.Input{}, fmt.Errorf("list %T: %w", l, err)
			}
		}
		in.GPUs = usage.DRAGPUs(slices.Items, claims.Items)
		in.ClaimDevices = usage.ClaimDevices(claims.Items)
		in.PodClaims = usage.PodClaims(slices.Items, claims.Items)
	}
	if set := s.engine.Active(); set != nil {
		in.Config, _ = usage.FromData(set.Data) // validated before the set went live
	}
	return in, nil
}

// validSet refuses a policy set whose quota declarations or usage data
// (prices, typical sizes) cannot be read.
func validSet(s *policy.Set) error {
	if err := quota.ValidSet(s); err != nil {
		return err
	}
	return usage.ValidSet(s)
}
