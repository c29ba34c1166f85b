package webhook

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
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

// jobs reads the Job that owns a pod arriving with its template's seal,
// from the API server (get only, no informer): one read per such pod, and
// no cache of every Job in the cluster in each replica.
type jobs struct{ api client.Reader }

var _ mutate.WorkloadReader = jobs{}

func (j jobs) PodTemplateOf(ctx context.Context, namespace, kind, name string) (types.UID, map[string]string, bool, error) {
	if kind != "Job" {
		return "", nil, false, nil
	}
	job := &batchv1.Job{}
	err := j.api.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, job)
	if apierrors.IsNotFound(err) {
		return "", nil, false, nil
	}
	if err != nil {
		return "", nil, false, fmt.Errorf("get job %s/%s: %w", namespace, name, err)
	}
	return job.UID, job.Spec.Template.Annotations, true, nil
}
