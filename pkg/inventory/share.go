package inventory

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// shareOffer reads the agent's AnnotationShare: the resource, the size of
// one share and the shares per GPU its device plugin serves. ok is false
// when the node has none, or one that cannot be used (then err says why).
func shareOffer(n *corev1.Node) (offer allocator.ShareOffer, ok bool, err error) {
	raw, has := n.Annotations[allocator.AnnotationShare]
	if !has {
		return allocator.ShareOffer{}, false, nil
	}
	if err := json.Unmarshal([]byte(raw), &offer); err != nil {
		return allocator.ShareOffer{}, false, fmt.Errorf("annotation %s: %w", allocator.AnnotationShare, err)
	}
	if offer.Resource == "" || offer.UnitMiB <= 0 || offer.SharesPerGPU <= 0 {
		return allocator.ShareOffer{}, false, fmt.Errorf("annotation %s=%s needs a resource, unitMiB > 0 and sharesPerGPU > 0",
			allocator.AnnotationShare, raw)
	}
	return offer, true, nil
}

// shareResources are the share resources a node may advertise: the known
// names and the one its agent's offer names.
func shareResources(offer allocator.ShareOffer) []string {
	names := []string{ResourceShare, ResourceGPUShare}
	if offer.Resource != "" && offer.Resource != ResourceShare && offer.Resource != ResourceGPUShare {
		names = append(names, offer.Resource)
	}
	return names
}

// doubleServed names the share resource a node advertises beside
// nvidia.com/gpu, or "". NVIDIA's device plugin and a share plugin on the
// same node serve the same GPUs twice: a whole-GPU pod and a share can be
// handed one GPU, so such a node is in no pool.
func doubleServed(alloc map[string]int64, offer allocator.ShareOffer) string {
	if alloc[ResourceGPU] == 0 {
		return ""
	}
	for _, r := range shareResources(offer) {
		if alloc[r] > 0 {
			return r
		}
	}
	return ""
}

// Refusal is a GPU node the inventory keeps out of every pool, and why.
type Refusal struct {
	Node   string `json:"node"`
	Reason string `json:"reason"`
}

func (inv *Inventory) refuse(n *corev1.Node, reason string) {
	inv.Refused = append(inv.Refused, Refusal{Node: n.Name, Reason: reason})
	inv.warnf("node %s refused: %s", n.Name, reason)
}

// doubleServedReason is the refusal of a node whose GPUs two plugins serve.
func doubleServedReason(alloc map[string]int64, share string) string {
	return fmt.Sprintf("it advertises both %s=%d (NVIDIA's device plugin) and %s=%d (a memory-share device plugin) "+
		"for the same GPUs, so one GPU could be handed out twice; run gpuadmit's device-plugin agent only on nodes "+
		"labelled %s=%s where NVIDIA's device plugin does not run, or remove the share plugin; "+
		"gpuadmit places no pod on this node until then",
		ResourceGPU, alloc[ResourceGPU], share, alloc[share], allocator.LabelNodeMode, allocator.NodeModeDevicePlugin)
}
