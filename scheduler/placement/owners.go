package placement

import (
	"context"
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpuadmit/gpuadmit/pkg/poolowner"
)

// DefaultRecordNamespace holds gpuadmit's record of the pools
// gpuadmit-scheduler may own, as deployed (gpuadmit-system).
const DefaultRecordNamespace = "gpuadmit-system"

// ownership follows gpuadmit's record of the pools gpuadmit-scheduler may
// own now (the ConfigMap gpuadmit-scheduler-pools, which only gpuadmit's
// leader-elected controller writes). The webhook gives gpuadmit-scheduler
// only those pools, from its own cache of the record; a replica whose
// cache lags may still admit a pod to gpuadmit-scheduler on a pool the
// record has just given to the stock scheduler. The plugin refuses such a
// pod, so it never places beside the stock scheduler; the controller then
// replaces it. Safe for concurrent use.
type ownership struct {
	record atomic.Pointer[poolowner.Owners]
	synced cache.InformerSynced
}

// followRecord starts an informer of the record's one ConfigMap in ns.
func followRecord(ctx context.Context, c kubernetes.Interface, ns string) (*ownership, error) {
	f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", poolowner.ConfigMapName).String()
		}))
	inf := f.Core().V1().ConfigMaps().Informer()
	o := &ownership{synced: inf.HasSynced}
	if _, err := inf.AddEventHandler(o.handler()); err != nil {
		return nil, fmt.Errorf("%s: watch %s/%s: %w", Name, ns, poolowner.ConfigMapName, err)
	}
	f.Start(ctx.Done())
	return o, nil
}

func (o *ownership) handler() cache.ResourceEventHandler {
	set := func(obj any) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok {
			return
		}
		rec, err := poolowner.Parse(cm.Data)
		if err != nil {
			klog.ErrorS(err, "gpuadmit's record of gpuadmit-scheduler's pools does not parse; keeping the last one")
			return
		}
		o.record.Store(&rec)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(any) { o.record.Store(&poolowner.Owners{}) },
	}
}

// refuse says why gpuadmit-scheduler may not place pod now, or nil: a pod
// gpuadmit placed on a pool the record does not give gpuadmit-scheduler,
// or, placed by DRA alternatives, on pools one of which it does not give
// it (the pod may be placed on any). Pods gpuadmit did not place (no pool
// in their decision record) are not its to judge.
func (o *ownership) refuse(pod *corev1.Pod) *fwk.Status {
	pools := poolowner.PoolsOf(pod)
	if o == nil || len(pools) == 0 {
		return nil
	}
	if !o.synced() {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gpuadmit's record of the pools %s may own (%s) is not read yet", poolowner.SchedulerName, poolowner.ConfigMapName))
	}
	rec := o.record.Load()
	if rec == nil {
		rec = &poolowner.Owners{}
	}
	for _, pool := range pools {
		if s := rec.Of(pool); s != poolowner.Owned {
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("pool %s is not %s's now (gpuadmit's record %s says %s): the stock scheduler may place there, so this pod waits to be replaced", pool, poolowner.SchedulerName, poolowner.ConfigMapName, s))
		}
	}
	return nil
}
