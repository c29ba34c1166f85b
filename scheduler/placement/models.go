package placement

import (
	"encoding/json"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// Which GPU models a pod accepts. The scarcity price (see scarcity.go)
// needs, for every kind of pod in the target workload, the models it may
// run on. A pod narrows them in two ways, both read here:
//
//   - its DRA requests: a request whose devices are selected by gpuadmit's
//     model selector (pkg/claim.ModelSelector), an exact request or a
//     prioritized list whose every alternative names a model, accepts
//     those models; the pod accepts what all its requests accept;
//   - its own node constraints (nodeSelector, required node affinity), as
//     the webhook writes them to pin a pod to one pool, or as a user or a
//     trace writes them: a model is accepted where some node of that model
//     matches them. Which nodes match is the supply's to say (it knows the
//     nodes); the pod's part is its constraints, spelled as a key.

// noModel is the models spec of a pod whose requests exclude every model
// (two requests on different models): allocator.ModelAllowed allows it none.
const noModel = "!"

// requestModels is the models spec of one DRA request: the model its
// selectors pick, or the models of its alternatives; "" (any) where one
// of them names no model.
func requestModels(req resourceapi.DeviceRequest) string {
	if ex := req.Exactly; ex != nil {
		return selectorsModel(ex.Selectors)
	}
	var ms []string
	for _, s := range req.FirstAvailable {
		m := selectorsModel(s.Selectors)
		if m == "" {
			return ""
		}
		ms = append(ms, m)
	}
	return spellModels(ms)
}

// selectorsModel is the model gpuadmit's model selector among sels picks;
// "" for none.
func selectorsModel(sels []resourceapi.DeviceSelector) string {
	for _, sel := range sels {
		if sel.CEL == nil {
			continue
		}
		if m, ok := selectedModel(sel.CEL.Expression); ok {
			return m
		}
	}
	return ""
}

// spellModels is ms as a models spec: sorted, each once, "|"-joined.
func spellModels(ms []string) string {
	ms = slices.Clone(ms)
	slices.Sort(ms)
	return strings.Join(slices.Compact(ms), "|")
}

// intersectModels is the models both specs allow: "" allows any, noModel
// none.
func intersectModels(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "" || a == b:
		return a
	}
	var both []string
	for _, m := range strings.Split(a, "|") {
		if slices.Contains(strings.Split(b, "|"), m) {
			both = append(both, m)
		}
	}
	if len(both) == 0 {
		return noModel
	}
	return spellModels(both)
}

// first is what a prioritized list asks first of shares and whole GPUs:
// the items of its first alternative that has some (MIG devices are not
// a kind the workload counts); none when no alternative has.
func (c choice) first() []item {
	for _, a := range c {
		if len(a.items) > 0 {
			return a.items
		}
	}
	return nil
}

// nodeConstraints spells the pod's node constraints that the scheduler's
// NodeAffinity filter applies (nodeSelector and required node affinity) as
// a key; "" for none. Pods with the same key accept the same nodes.
func nodeConstraints(pod *corev1.Pod) string {
	var req *corev1.NodeSelector
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		req = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	if len(pod.Spec.NodeSelector) == 0 && req == nil {
		return ""
	}
	b, err := json.Marshal(struct {
		S map[string]string    `json:"s,omitempty"`
		R *corev1.NodeSelector `json:"r,omitempty"`
	}{pod.Spec.NodeSelector, req})
	if err != nil { // a map of strings and API types always marshal
		return ""
	}
	return string(b)
}
