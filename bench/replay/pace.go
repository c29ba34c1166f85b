package replay

import (
	"context"
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
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, obj any) { see(obj) }}); err != nil {
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
func (s *settled) waitBelow(ctx context.Context, created, most int) error {
	for created-s.count() > most {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}
