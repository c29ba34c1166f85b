package cluster

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/quota"
)

// AddNodes creates fake GPU nodes from a YAML stream of Nodes (kwok takes
// them over): the object first, then its status, which holds the GPU
// allocatable that create ignores.
func (c *Cluster) AddNodes(ctx context.Context, path string) ([]corev1.Node, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	nodes, err := inventory.ReadNodes(f)
	if err != nil {
		return nil, err
	}
	for i := range nodes {
		if err := c.AddNode(ctx, nodes[i].DeepCopy()); err != nil {
			return nil, err
		}
	}
	// The accounting capacity the node agent would advertise, which GPU pods
	// request so that ResourceQuota counts their GPU memory.
	if _, err := quota.PatchCapacity(ctx, c.Client); err != nil {
		return nil, err
	}
	return nodes, nil
}

// AddNode creates the node, gives back its own taints (the API server's
// TaintNodesByCondition adds node.kubernetes.io/not-ready on create, which
// only the node lifecycle controller, not run here, would lift once kwok
// reports the node Ready), then sets its status. Controllers write new
// nodes too (the controller-manager's annotations, gpuadmit's capacity),
// so each write reads the node afresh and is retried on a conflict.
func (c *Cluster) AddNode(ctx context.Context, n *corev1.Node) error {
	taints, status := n.Spec.Taints, n.Status
	n.ResourceVersion = ""
	if err := c.Client.Create(ctx, n); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create node %s: %w", n.Name, err)
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(n), n); err != nil {
			return err
		}
		n.Spec.Taints = taints
		return c.Client.Update(ctx, n)
	}); err != nil {
		return fmt.Errorf("set taints of node %s: %w", n.Name, err)
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(n), n); err != nil {
			return err
		}
		n.Status = status
		return c.Client.Status().Update(ctx, n)
	}); err != nil {
		return fmt.Errorf("set status of node %s: %w", n.Name, err)
	}
	return nil
}

// Apply creates every object of a YAML stream (already-existing ones are kept).
func (c *Cluster) Apply(ctx context.Context, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if err.Error() == "EOF" {
				return nil
			}
			return fmt.Errorf("read %s: %w", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := c.Client.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
}

// waitRecordPolicy waits until the API server enforces the policy that
// guards gpuadmit's record (it loads new policies asynchronously): a dry-run
// update that adds a gpuadmit.io/decision annotation to a probe pod in
// kube-system (which the mutating webhook never sees) is refused.
func (c *Cluster) waitRecordPolicy(ctx context.Context, timeout time.Duration) error {
	probe := &corev1.Pod{}
	probe.Namespace, probe.Name = "kube-system", "gpuadmit-record-policy-probe"
	probe.Spec.Containers = []corev1.Container{{Name: "main", Image: "busybox"}}
	defer c.Client.Delete(ctx, probe, client.GracePeriodSeconds(0))
	last := "no attempt"
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := c.Client.Create(ctx, probe.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			last = "create probe pod: " + err.Error()
			continue
		}
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"gpuadmit.io/decision":"probe"}}}`))
		err := c.Client.Patch(ctx, probe.DeepCopy(), patch, client.DryRunAll)
		if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
			return nil
		}
		last = fmt.Sprintf("a dry-run record edit got %v", err)
	}
	return fmt.Errorf("the record policy is not enforced after %s: %s", timeout, last)
}
