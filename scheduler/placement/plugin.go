package placement

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = "GPUAdmit"

// Plugin is GPUAdmit. See the package documentation.
type Plugin struct {
	claims        fwk.ResourceClaimTracker // nil without DRA
	slices        cache.Indexer            // gpuadmit's ResourceSlices by node; nil without DRA
	work          *workload
	offers        offers
	placers       placerCache
	nodes         nodeStates
	supply        supply
	fixedWorkload bool       // the args fix the target workload
	owners        *ownership // nil without a client: every pool is the plugin's
}

var (
	_ fwk.PreFilterPlugin   = (*Plugin)(nil)
	_ fwk.FilterPlugin      = (*Plugin)(nil)
	_ fwk.PreScorePlugin    = (*Plugin)(nil)
	_ fwk.ScorePlugin       = (*Plugin)(nil)
	_ fwk.ScoreExtensions   = (*Plugin)(nil)
	_ fwk.SignPlugin        = (*Plugin)(nil)
	_ fwk.EnqueueExtensions = (*Plugin)(nil)
)

// sliceIndex indexes gpuadmit's ResourceSlices by node name.
const sliceIndex = "gpuadmit.io/node"

// New builds the plugin for one profile (the framework's PluginFactory).
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, err := decodeArgs(obj)
	if err != nil {
		return nil, err
	}
	pl := &Plugin{work: newWorkload()}
	registerMetrics()
	if m := h.SharedDRAManager(); m != nil {
		pl.claims = m.ResourceClaims()
	}
	if f := h.SharedInformerFactory(); f != nil {
		inf := f.Resource().V1().ResourceSlices().Informer()
		if pl.slices, err = indexSlices(inf); err != nil {
			return nil, err
		}
		if _, err := inf.AddEventHandler(pl.sliceHandler()); err != nil {
			return nil, fmt.Errorf("%s: watch ResourceSlices: %w", Name, err)
		}
		nodes := f.Core().V1().Nodes()
		if _, err := nodes.Informer().AddEventHandler(pl.supply.nodeHandler()); err != nil {
			return nil, fmt.Errorf("%s: watch Nodes: %w", Name, err)
		}
		pl.supply.nodes = nodes.Lister()
		if len(args.Workload) == 0 {
			var claims claimGetter
			if pl.claims != nil {
				claims = pl.claims
			}
			if _, err := f.Core().V1().Pods().Informer().AddEventHandler(pl.work.podHandler(h.ProfileName(), claims)); err != nil {
				return nil, fmt.Errorf("%s: watch pods: %w", Name, err)
			}
			pl.work.revised = func(rev uint64, kinds []weighted, pinned []pinnedKind) {
				pl.nodes.warm(pl.placers.getFor(pl, rev, kinds, pinned, true))
			}
		}
	}
	if len(args.Workload) > 0 {
		pl.work.fixed, pl.work.fixedPinned = kindsOf(args.Workload)
		pl.fixedWorkload = true
	}
	if c := h.ClientSet(); c != nil {
		if pl.owners, err = followRecord(ctx, c, args.recordNamespace()); err != nil {
			return nil, err
		}
	}
	return pl, nil
}

// indexSlices adds the index of gpuadmit's ResourceSlices by node, once
// for all profiles.
func indexSlices(inf cache.SharedIndexInformer) (cache.Indexer, error) {
	if _, ok := inf.GetIndexer().GetIndexers()[sliceIndex]; ok {
		return inf.GetIndexer(), nil
	}
	err := inf.AddIndexers(cache.Indexers{sliceIndex: func(obj any) ([]string, error) {
		s, ok := obj.(*resourceapi.ResourceSlice)
		if !ok || s.Spec.Driver != allocator.DRADriver || s.Spec.NodeName == nil {
			return nil, nil
		}
		return []string{*s.Spec.NodeName}, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("%s: index ResourceSlices: %w", Name, err)
	}
	return inf.GetIndexer(), nil
}

// Name returns the plugin's name.
func (pl *Plugin) Name() string { return Name }

const (
	filterKey fwk.StateKey = Name + "/filter"
	scoreKey  fwk.StateKey = Name + "/score"
)

// shares is the device-plugin part of a pod's request: units per container.
type shares struct {
	resource corev1.ResourceName
	units    map[string]int64
}

func (s *shares) Clone() fwk.StateData { return s }

// PreFilter refuses a pod of a pool gpuadmit's record does not give
// gpuadmit-scheduler now (ownership), reads the share units each container
// asks of a device-plugin pool, and skips Filter for pods that ask none.
func (pl *Plugin) PreFilter(_ context.Context, state fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if st := pl.owners.refuse(pod); st != nil {
		return nil, st
	}
	s := &shares{units: map[string]int64{}}
	for _, c := range pod.Spec.Containers {
		for _, res := range shareResources {
			if n := quantity(c.Resources, res); n > 0 {
				s.resource, s.units[c.Name] = res, n
			}
		}
	}
	if len(s.units) == 0 {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	state.Write(filterKey, s)
	return nil, nil
}

// PreFilterExtensions returns nil: Filter does not depend on other pods.
func (pl *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter refuses a device-plugin node where a container asks more shares
// than one GPU of the node offers: a container's devices must all be on one
// GPU (the agent's Allocate refuses the rest), and the stock scheduler,
// which sees only the node's total, would bind the pod for the kubelet to
// fail. Nothing else is refused: which GPU holds a running container's
// shares the scheduler cannot know, so any other per-GPU refusal could turn
// away a node that has room.
func (pl *Plugin) Filter(_ context.Context, state fwk.CycleState, _ *corev1.Pod, n fwk.NodeInfo) *fwk.Status {
	d, err := state.Read(filterKey)
	if err != nil {
		return fwk.AsStatus(err)
	}
	s := d.(*shares)
	o := pl.offers.get(n.Node())
	if o == nil || o.offer.Resource != string(s.resource) {
		return nil // NodeResourcesFit finds no such resource there
	}
	for c, u := range s.units {
		if u > o.offer.SharesPerGPU {
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
				"container %s asks %d %s, more than the %d one GPU of the node offers", c, u, s.resource, o.offer.SharesPerGPU))
		}
	}
	return nil
}

// PreScore reads the pod's GPU request and scores every node, under the
// workload's current revision, with what the plugin kept of each node
// since it last changed (nodeStates). Scoring all nodes here, not node by
// node in Score, lets one lock and one workload snapshot serve the cycle,
// and makes the plugin's PreScore duration its whole placement time per
// pod. Pods whose request cannot be read skip Score: the plugin then
// leaves the choice to the other plugins.
func (pl *Plugin) PreScore(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	start := time.Now()
	r, err := readRequest(pod, pl.claimGetter())
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Not scoring pod", "pod", klog.KObj(pod), "err", err)
		return fwk.NewStatus(fwk.Skip)
	}
	rev, kinds, pinned := pl.work.snapshotPinned(pl.nodes.refreshCycles(len(nodes)))
	state.Write(scoreKey, pl.nodes.score(pl, nodes, r, pl.placers.get(pl, rev, kinds, pinned)))
	placementDuration.Observe(time.Since(start).Seconds())
	return nil
}

func (pl *Plugin) claimGetter() claimGetter {
	if pl.claims == nil {
		return nil
	}
	return pl.claims
}

func (pl *Plugin) claimHolder() claimHolder {
	if pl.claims == nil {
		return nil
	}
	return pl.claims
}

// Score is the node's score from PreScore; a node the plugin cannot model
// scores unscored, as does one PreScore was not given.
func (pl *Plugin) Score(_ context.Context, state fwk.CycleState, _ *corev1.Pod, n fwk.NodeInfo) (int64, *fwk.Status) {
	d, err := state.Read(scoreKey)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	s, ok := d.(*cycle).lookup(n)
	if !ok {
		return unscored, nil
	}
	return s, nil
}

// sliceHandler counts changes to gpuadmit's ResourceSlices, which end
// every node's kept view (nodeStates).
func (pl *Plugin) sliceHandler() cache.ResourceEventHandler {
	bump := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if s, ok := obj.(*resourceapi.ResourceSlice); ok && s.Spec.Driver == allocator.DRADriver {
			pl.nodes.slices.Add(1)
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) { bump(obj) },
		UpdateFunc: func(_, obj any) { bump(obj) }, DeleteFunc: bump}
}

// draView is the node's GPUs in gpuadmit's ResourceSlices; nil without.
// The slices are parsed once for as long as they stay as they are (st's
// layout, of the slices' count st was reset at).
func (pl *Plugin) draView(n fwk.NodeInfo, st *nodeState) *gpuView {
	if pl.slices == nil {
		return nil
	}
	if !st.parsed || st.layoutAt != st.slices {
		st.layout, st.parsed, st.layoutAt = nil, true, st.slices
		objs, err := pl.slices.ByIndex(sliceIndex, n.Node().Name)
		if err != nil || len(objs) == 0 {
			return nil
		}
		sl := make([]*resourceapi.ResourceSlice, 0, len(objs))
		for _, o := range objs {
			sl = append(sl, o.(*resourceapi.ResourceSlice))
		}
		st.layout = parseLayout(sl)
	}
	if st.layout == nil {
		return nil
	}
	return st.layout.view(heldOn(n, pl.claimHolder()))
}

// ScoreExtensions returns the plugin: it normalizes its own scores.
func (pl *Plugin) ScoreExtensions() fwk.ScoreExtensions { return pl }

// NormalizeScore ranks the nodes (see normalize).
func (pl *Plugin) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *corev1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	normalize(scores)
	return nil
}
