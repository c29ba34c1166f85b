package quota

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// PatchCapacity advertises every GPU node's accounting capacity (what its GPU
// resources can hand out, in real MiB) as node capacity and allocatable, with
// a status patch, as Kubernetes documents for node-level extended resources.
// The node agent does this on real nodes; this serves clusters without it and
// the fake nodes of the end-to-end tests. It returns the nodes it patched.
func PatchCapacity(ctx context.Context, c client.Client) ([]string, error) {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var patched []string
	for _, p := range inventory.Build(nodes.Items, allocator.Default()).Pools {
		for _, n := range p.Nodes {
			acc := p.NodeAccounting(n)
			if len(acc) == 0 {
				continue
			}
			if err := patchNode(ctx, c, n.Name, acc); err != nil {
				return patched, err
			}
			patched = append(patched, n.Name)
		}
	}
	return patched, nil
}

func patchNode(ctx context.Context, c client.Client, name string, acc map[string]int64) error {
	res := map[string]string{}
	for r, v := range acc {
		res[r] = fmt.Sprint(v)
	}
	body, err := json.Marshal(map[string]any{"status": map[string]any{"capacity": res, "allocatable": res}})
	if err != nil {
		return err
	}
	node := &corev1.Node{}
	node.Name = name
	if err := c.Status().Patch(ctx, node, client.RawPatch("application/merge-patch+json", body)); err != nil {
		return fmt.Errorf("patch status of node %s: %w", name, err)
	}
	return nil
}
