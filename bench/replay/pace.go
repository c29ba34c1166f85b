package replay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// settled counts the replay's pods that are bound or marked unschedulable,
// as a pod informer shows them (Options.MaxPending).
type settled struct {
	mu    sync.Mutex
	names map[string]bool
	gone  []string // pods deleted: nothing in the replay deletes one
}

// watchSettled starts counting the settled pods of the replay's namespace.
func watchSettled(ctx context.Context, cs kubernetes.Interface) (*settled, error) {
	s := &settled{names: map[string]bool{}}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(Namespace))
	inf := f.Core().V1().Pods().Informer()
	see := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			if outcome(p) != podWaiting {
				s.mu.Lock()
				s.names[p.Name] = true
				s.mu.Unlock()
			}
		}
	}
	deleted := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok {
			s.mu.Lock()
			s.gone = append(s.gone, p.Name)
			s.mu.Unlock()
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, obj any) { see(obj) }, DeleteFunc: deleted}); err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("pod informer did not sync")
	}
	return s, nil
}

// count is how many pods have settled.
func (s *settled) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.names)
}

// waitBelow waits until at most most of the created pods are unsettled.
// It fails once a pod was deleted: the pod it would wait for may be gone,
// and the run is no longer the trace.
func (s *settled) waitBelow(ctx context.Context, created, most int) error {
	for created-s.count() > most {
		if err := s.goneErr(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// goneErr is an error naming the pods deleted during the replay, nil for
// none. gpuadmit's handover deletes pods that wait for gpuadmit-scheduler
// once its Lease is no longer renewed (their controllers make them again,
// for the scheduler that took the pools over); the replay's pods have no
// controller that does.
func (s *settled) goneErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.gone) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d pods deleted during the replay (%v); %s", errPodsGone, len(s.gone), s.gone[:min(len(s.gone), 5)], whyGone)
}

// errPodsGone marks a replay whose pods were deleted under it.
var errPodsGone = errors.New("pods gone")

// whyGone is what deletes a replay's pods, as its errors say.
const whyGone = "gpuadmit's handover replaces pods waiting for gpuadmit-scheduler when its Lease lapses: see the controller's log"
