package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// NodeClient is the part of the API the agent needs on its own Node: read
// it, patch its annotation (get/patch nodes) and its status (patch
// nodes/status). controller-runtime's client.Client satisfies it.
type NodeClient interface {
	Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
	Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error
	Status() client.SubResourceWriter
}

// publisher writes the node's GPUs on its Node.
type publisher struct {
	client NodeClient
	node   string
	// accounting is the node's accounting capacity; nil is Accounting.
	accounting func([]GPU) map[string]int64
}

// publish writes the annotations and the accounting capacity. Both are
// merge patches of only the agent's own keys, so the kubelet's and other
// controllers' writes to the same Node never conflict with the agent's.
// served says whether the plugin serves offer; without it the share
// annotation is removed. It reads the Node once and writes only what
// differs from it: every resync publishes, and a Node that already says
// what the agent would write costs the API server one GET, no write.
func (p *publisher) publish(ctx context.Context, gpus []GPU, offer allocator.ShareOffer, served bool) error {
	node := &corev1.Node{}
	if err := p.client.Get(ctx, client.ObjectKey{Name: p.node}, node); err != nil {
		return fmt.Errorf("get node %s: %w", p.node, err)
	}
	if err := p.annotate(ctx, node, gpus, offer, served); err != nil {
		return err
	}
	if p.accounting != nil {
		return p.advertise(ctx, node, p.accounting(gpus))
	}
	return p.advertise(ctx, node, Accounting(gpus))
}

// annotate sets AnnotationGPUs to the GPUs as JSON, and AnnotationShare to
// the offer, or removes it, unless node already has exactly those.
func (p *publisher) annotate(ctx context.Context, node *corev1.Node, gpus []GPU, offer allocator.ShareOffer, served bool) error {
	if gpus == nil {
		gpus = []GPU{}
	}
	value, err := json.Marshal(gpus)
	if err != nil {
		return fmt.Errorf("encode GPUs: %w", err)
	}
	annotations := map[string]any{AnnotationGPUs: string(value), AnnotationShare: nil} // null removes it
	share := ""
	if served {
		data, err := json.Marshal(offer)
		if err != nil {
			return fmt.Errorf("encode share: %w", err)
		}
		share = string(data)
		annotations[AnnotationShare] = share
	}
	gotShare, hasShare := node.Annotations[AnnotationShare]
	if node.Annotations[AnnotationGPUs] == string(value) && hasShare == served && gotShare == share {
		return nil
	}
	patch := map[string]any{"metadata": map[string]any{"annotations": annotations}}
	return p.patch(ctx, patch, p.client.Patch, "annotate")
}

// advertise sets the accounting resources in the node's capacity and
// allocatable, and removes those of models the node no longer has (its GPUs
// were replaced), unless node already advertises exactly want.
func (p *publisher) advertise(ctx context.Context, node *corev1.Node, want map[string]int64) error {
	if advertises(node.Status.Capacity, want) && advertises(node.Status.Allocatable, want) {
		return nil
	}
	resources := map[string]any{}
	for _, list := range []corev1.ResourceList{node.Status.Capacity, node.Status.Allocatable} {
		for name := range list {
			if isAccountingResource(string(name)) {
				resources[string(name)] = nil // a JSON merge patch's null removes it
			}
		}
	}
	for name, v := range want {
		resources[name] = strconv.FormatInt(v, 10)
	}
	patch := map[string]any{"status": map[string]any{"capacity": resources, "allocatable": resources}}
	statusPatch := func(ctx context.Context, obj client.Object, patch client.Patch, _ ...client.PatchOption) error {
		return p.client.Status().Patch(ctx, obj, patch)
	}
	return p.patch(ctx, patch, statusPatch, "advertise capacity on")
}

// advertises reports whether list's accounting resources are exactly want.
func advertises(list corev1.ResourceList, want map[string]int64) bool {
	n := 0
	for name, q := range list {
		if !isAccountingResource(string(name)) {
			continue
		}
		v, ok := want[string(name)]
		if !ok || q.CmpInt64(v) != 0 {
			return false
		}
		n++
	}
	return n == len(want)
}

type patchFunc func(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error

func (p *publisher) patch(ctx context.Context, body map[string]any, do patchFunc, what string) error {
	data, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("%s node %s: %w", what, p.node, err)
	}
	node := &corev1.Node{}
	node.Name = p.node
	if err := do(ctx, node, client.RawPatch(types.MergePatchType, data)); err != nil {
		return fmt.Errorf("%s node %s: %w", what, p.node, err)
	}
	return nil
}
