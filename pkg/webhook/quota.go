package webhook

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/gpuadmit/gpuadmit/pkg/mutate"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
	"github.com/gpuadmit/gpuadmit/pkg/quota"
)

// engineQuotas reads the declarations of the active set.
type engineQuotas struct{ engine *policy.Engine }

func (e engineQuotas) Quotas() ([]quota.Declaration, string) {
	set := e.engine.Active()
	if set == nil {
		return nil, ""
	}
	decls, _ := quota.FromData(set.Data) // validated before the set went live
	return decls, set.Revision
}

// resync asks the quota reconciler to look at every namespace after a new
// revision went live. Sends never block: a replica that is not the leader
// does not read the channel, and the leader lists every namespace when it starts.
func resync(mgr manager.Manager, ch chan<- event.TypedGenericEvent[*corev1.Namespace]) func(*policy.Set) {
	return func(*policy.Set) {
		var nss corev1.NamespaceList
		if err := mgr.GetCache().List(context.Background(), &nss); err != nil {
			return
		}
		for i := range nss.Items {
			select {
			case ch <- event.TypedGenericEvent[*corev1.Namespace]{Object: &nss.Items[i]}:
			default:
			}
		}
	}
}

// quotas reads a namespace's gpuadmit ResourceQuota from the cache, for the policy input.
type quotas struct{ cache client.Reader }

var _ mutate.QuotaGetter = quotas{}

func (q quotas) Quota(ctx context.Context, ns string) (*corev1.ResourceQuota, error) {
	rq := &corev1.ResourceQuota{}
	err := q.cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: quota.Name}, rq)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return rq, err
}
