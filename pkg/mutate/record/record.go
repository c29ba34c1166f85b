package record

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpuadmit/gpuadmit/pkg/intent"
	"github.com/gpuadmit/gpuadmit/pkg/poolowner"
)

// Annotations gpuadmit writes. They are gpuadmit's record: users cannot set them.
const (
	// AnnotationDecision is the human-readable record: what was asked, what was
	// given, on which pool, by which rule, under which policy revision.
	AnnotationDecision = poolowner.AnnotationDecision
	// AnnotationRequest keeps each GPU container's original GPU resources, so
	// that gpuadmit can recompute its decision when the pod comes back.
	AnnotationRequest = "gpuadmit.io/request"

	ownPrefix = "gpuadmit.io/"
)

// AnnotationAcceptedModels lists, sorted and comma-separated, the GPU
// models of the pools the policy's candidates named for a pod placed on
// one pool: the models it could have run on. A replica's pod cache keeps it
// (pkg/webhook's StripPod) so that the pick of one pool knows which of the
// cluster's pods only some models can serve (decide.Demand).
//
// It is part of gpuadmit's record (IsOwnAnnotation): a pod that arrives with
// it forged is decided again and denied where it differs, it is sealed with
// the record, and the API server keeps it unchanged on update. It steers the
// pick of one pool only, never the gate: no quota, accounting or record
// check reads it. A tenant who got a pod past the webhook with a false list
// (the webhook down and failing open, and the pod labelled gpuadmit.io/managed
// by hand) could only shift later pods of every tenant a little towards or
// away from some models, never past a quota or onto a pool their policy
// does not offer.
const AnnotationAcceptedModels = "gpuadmit.io/accepted-models"

// userAnnotations are the gpuadmit.io/ annotations that belong to pod authors.
var userAnnotations = map[string]bool{
	intent.AnnotationClass:   true,
	intent.AnnotationBackend: true,
	intent.AnnotationModel:   true,
}

// IsOwnAnnotation reports whether key is reserved for gpuadmit's record.
func IsOwnAnnotation(key string) bool {
	return strings.HasPrefix(key, ownPrefix) && !userAnnotations[key]
}

func HasOwnAnnotations(pod *corev1.Pod) bool {
	for k := range pod.Annotations {
		if IsOwnAnnotation(k) {
			return true
		}
	}
	return false
}

// Original is the record of a pod's original GPU resources, by container
// name, kept in AnnotationRequest.
type Original map[string]Resources

// Resources are one container's GPU limits and requests as its author wrote them.
type Resources struct {
	Limits   map[string]string `json:"limits,omitempty"`
	Requests map[string]string `json:"requests,omitempty"`
}

// OriginalGPU copies the container's GPU keys before they are rewritten.
func OriginalGPU(c *corev1.Container) Resources {
	return Resources{Limits: gpuKeys(c.Resources.Limits), Requests: gpuKeys(c.Resources.Requests)}
}

func gpuKeys(list corev1.ResourceList) map[string]string {
	var out map[string]string
	for k, q := range list {
		if intent.IsGPUResource(k) {
			if out == nil {
				out = map[string]string{}
			}
			out[string(k)] = intent.FormatQuantity(q)
		}
	}
	return out
}

// Encode is the AnnotationRequest value of r.
func (r Original) Encode() (string, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("encode %s: %w", AnnotationRequest, err)
	}
	return string(b), nil
}

// DecodeOriginal reads the pod's AnnotationRequest.
func DecodeOriginal(pod *corev1.Pod) (Original, error) {
	raw, ok := pod.Annotations[AnnotationRequest]
	if !ok {
		return nil, fmt.Errorf("%s is missing", AnnotationRequest)
	}
	var r Original
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return nil, fmt.Errorf("%s is not gpuadmit's record: %w", AnnotationRequest, err)
	}
	return r, nil
}

// Restore puts the recorded GPU resources res back into the container, in
// place of the GPU resources it has.
func Restore(c *corev1.Container, res Resources) error {
	for _, l := range []struct {
		list *corev1.ResourceList
		keys map[string]string
	}{{&c.Resources.Limits, res.Limits}, {&c.Resources.Requests, res.Requests}} {
		for k := range *l.list {
			if intent.IsGPUResource(k) {
				delete(*l.list, k)
			}
		}
		for k, v := range l.keys {
			q, err := resource.ParseQuantity(v)
			if err != nil || !intent.IsGPUResource(corev1.ResourceName(k)) {
				return fmt.Errorf("%s: container %q: %s=%q is not a recorded GPU resource", AnnotationRequest, c.Name, k, v)
			}
			if *l.list == nil {
				*l.list = corev1.ResourceList{}
			}
			(*l.list)[corev1.ResourceName(k)] = q
		}
	}
	return nil
}
