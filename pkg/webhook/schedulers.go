package webhook

import (
	"sync/atomic"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/gpuadmit/gpuadmit/pkg/handover"
	"github.com/gpuadmit/gpuadmit/pkg/mutate"
)

// SchedulerName is gpuadmit-scheduler's name, the scheduler its profile
// serves and the Lease its leader renews (deploy/scheduler).
const SchedulerName = handover.SchedulerName

var _ mutate.SchedulerSource = (*schedulers)(nil)

// schedulers is what admission reads of gpuadmit-scheduler: whether it
// runs (its Lease, judged by when this replica saw it change, for
// input.cluster.schedulers) and which pools the controller's record lets
// it own (input.cluster.owners). The record, not the Lease, decides: the
// controller switches a pool only once no pod of the old owner waits on
// it, which one replica's view of the Lease cannot know. Safe for
// concurrent use.
type schedulers struct {
	lease  *handover.Lease
	record atomic.Pointer[handover.Owners]
	log    logr.Logger
}

// Live lists gpuadmit-scheduler while its Lease is live.
func (s *schedulers) Live() []string { return s.lease.Running() }

// PoolOwner is the pool's state in the record; every pool is the stock
// scheduler's before a record is seen.
func (s *schedulers) PoolOwner(pool string) string {
	if o := s.record.Load(); o != nil {
		return string(o.Of(pool))
	}
	return string(handover.Stock)
}

// RecordHandler follows the record's ConfigMap (the cache holds only it).
// A record that does not parse is logged and the last good one kept: the
// controller writes it again.
func (s *schedulers) RecordHandler() toolscache.ResourceEventHandler {
	set := func(obj any) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok || cm.Name != handover.ConfigMapName {
			return
		}
		o, err := handover.Parse(cm.Data)
		if err != nil {
			s.log.Error(err, "gpuadmit-scheduler's record does not parse; keeping the last one")
			return
		}
		s.record.Store(&o)
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(any) { s.record.Store(&handover.Owners{}) },
	}
}
