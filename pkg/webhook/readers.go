package webhook

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpuadmit/gpuadmit/pkg/mutate"
)

// namespaces reads namespaces from the informer cache, and from the API
// server when the cache has not seen a namespace created a moment ago.
type namespaces struct {
	cache, api client.Reader
}

var _ mutate.NamespaceGetter = namespaces{}

func (n namespaces) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	err := n.cache.Get(ctx, client.ObjectKey{Name: name}, ns)
	if apierrors.IsNotFound(err) {
		err = n.api.Get(ctx, client.ObjectKey{Name: name}, ns)
	}
	if err != nil {
		return nil, fmt.Errorf("get namespace %s: %w", name, err)
	}
	return ns, nil
}

// priorityClasses reads PriorityClasses from the informer cache, and from
// the API server when the cache has not seen a class created a moment ago
// (a class the cache lacks denies the pod, so it is asked for once more).
type priorityClasses struct {
	cache, api client.Reader
}

var _ mutate.PriorityClassGetter = priorityClasses{}

func (p priorityClasses) PriorityClass(ctx context.Context, name string) (*schedulingv1.PriorityClass, bool, error) {
	pc := &schedulingv1.PriorityClass{}
	err := p.cache.Get(ctx, client.ObjectKey{Name: name}, pc)
	if apierrors.IsNotFound(err) {
		err = p.api.Get(ctx, client.ObjectKey{Name: name}, pc)
	}
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("get priorityclass %s: %w", name, err)
	}
	return pc, true, nil
}
