package record

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpuadmit/gpuadmit/pkg/claim"
	"github.com/gpuadmit/gpuadmit/pkg/intent"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// Written is every value gpuadmit wrote into a pod, kept in
// AnnotationWritten under the MAC so that a pod coming back where its seal
// holds (reinvocation, a Kueue Job's own pods: see the handler's check of a seal) is
// checked against it without deciding again.
// Its field names are short: it rides on every GPU pod.
type Written struct {
	// Revision is the policy revision that decided.
	Revision string `json:"rev"`
	// Resources are the GPU and accounting resources of each container (by
	// name), the same in limits and requests.
	Resources map[string]map[string]string `json:"res,omitempty"`
	// Claims are the pod resource claims gpuadmit added (name → template),
	// and ClaimRefs each container's references to them.
	Claims    map[string]string   `json:"claims,omitempty"`
	ClaimRefs map[string][]string `json:"refs,omitempty"`
	// NodeSelector, Tolerations and Priority are the pool's and the policy's.
	NodeSelector map[string]string   `json:"sel,omitempty"`
	Tolerations  []corev1.Toleration `json:"tol,omitempty"`
	Priority     string              `json:"prio,omitempty"`
	// NotInNamed is set where every required node-affinity term got NotInNamedPool.
	NotInNamed bool `json:"notInNamed,omitempty"`
	// Labels and Annotations are the decision's (gpuadmit's own annotations
	// are under the MAC themselves).
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"ann,omitempty"`

	// SealedAt is when the record was sealed (Unix seconds); zero in a
	// record sealed before seals expired (MACVersion1).
	SealedAt int64 `json:"at,omitempty"`
	// Workload is set where the record was sealed into a workload's pod
	// template: the workload the seal is bound to (the handler checks it).
	Workload *WorkloadRef `json:"wl,omitempty"`
}

// WorkloadRef names the workload whose pod template gpuadmit decided: its
// kind (Job) and its name, or, where it is created with metadata.generateName,
// that prefix (the API server names it only after admission).
type WorkloadRef struct {
	Kind         string `json:"kind"`
	Name         string `json:"name,omitempty"`
	GenerateName string `json:"generateName,omitempty"`
}

// String is kind/name, or kind/generateName* for a generated name.
func (r WorkloadRef) String() string {
	if r.Name == "" {
		return r.Kind + "/" + r.GenerateName + "*"
	}
	return r.Kind + "/" + r.Name
}

// Names reports whether a workload of kind named name is the one r names.
func (r WorkloadRef) Names(kind, name string) bool {
	if kind != r.Kind || name == "" {
		return false
	}
	if r.Name != "" {
		return name == r.Name
	}
	return r.GenerateName != "" && strings.HasPrefix(name, r.GenerateName)
}

// SetResources records the resources a container was given.
func (w *Written) SetResources(container string, list corev1.ResourceList) {
	if w.Resources == nil {
		w.Resources = map[string]map[string]string{}
	}
	m := map[string]string{}
	for k, q := range list {
		m[string(k)] = intent.FormatQuantity(q)
	}
	w.Resources[container] = m
}

// AddClaims records gpuadmit's claims in pod (once they are written into it) and the label that marks them.
func (w *Written) AddClaims(pod *corev1.Pod) {
	for _, c := range pod.Spec.ResourceClaims {
		if IsOwnClaim(c) {
			SetMeta(&w.Claims, map[string]string{c.Name: *c.ResourceClaimTemplateName})
		}
	}
	for _, c := range AllContainers(pod) {
		for _, ref := range c.Resources.Claims {
			if _, ok := w.Claims[ref.Name]; ok {
				if w.ClaimRefs == nil {
					w.ClaimRefs = map[string][]string{}
				}
				w.ClaimRefs[c.Name] = append(w.ClaimRefs[c.Name], ref.Name)
			}
		}
	}
	if len(w.Claims) > 0 {
		SetMeta(&w.Labels, map[string]string{claim.LabelShare: "true"})
	}
}

// Missing lists, as field paths, each written value the pod no longer has
// as written, and every GPU resource or gpuadmit claim it has beyond them:
// a valid MAC vouches for the record, and this ties the record to the pod.
func (w *Written) Missing(pod *corev1.Pod) []string {
	var out []string
	out = append(out, w.missingResources(pod)...)
	out = append(out, w.missingClaims(pod)...)
	out = append(out, MissingEntries("spec.nodeSelector", pod.Spec.NodeSelector, w.NodeSelector)...)
	out = append(out, MissingEntries("metadata.labels", pod.Labels, w.Labels)...)
	out = append(out, MissingEntries("metadata.annotations", pod.Annotations, w.Annotations)...)
	for _, t := range w.Tolerations {
		if !HasToleration(pod.Spec.Tolerations, t) {
			out = append(out, fmt.Sprintf("spec.tolerations[key=%s]", t.Key))
		}
	}
	if w.Priority != "" && pod.Spec.PriorityClassName != w.Priority {
		out = append(out, "spec.priorityClassName")
	}
	if w.NotInNamed && !ExcludesNamedPools(pod) {
		out = append(out, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution")
	}
	return out
}

// missingResources compares every container's GPU and accounting
// resources, limits and requests, with those written; a container gpuadmit
// gave none must have none.
func (w *Written) missingResources(pod *corev1.Pod) []string {
	var out []string
	seen := 0
	for _, c := range AllContainers(pod) {
		want, ok := w.Resources[c.Name]
		if ok {
			seen++
		}
		for field, list := range map[string]corev1.ResourceList{"limits": c.Resources.Limits, "requests": c.Resources.Requests} {
			if k, differs := differentGPU(list, want); differs {
				out = append(out, fmt.Sprintf("%s.resources.%s[%s]", containerPath(pod, c.Name), field, k))
			}
		}
	}
	if seen != len(w.Resources) {
		out = append(out, "spec.containers (a container gpuadmit gave GPU is gone)")
	}
	sort.Strings(out)
	return out
}

// differentGPU returns a GPU or accounting resource of list that is not as
// in want, or one of want that list lacks.
func differentGPU(list corev1.ResourceList, want map[string]string) (string, bool) {
	for k, q := range list {
		if !intent.IsGPUResource(k) && !inventory.IsAccountingResource(string(k)) {
			continue
		}
		v, ok := want[string(k)]
		if w, err := resource.ParseQuantity(v); !ok || err != nil || w.Cmp(q) != 0 {
			return string(k), true
		}
	}
	for k := range want {
		if _, ok := list[corev1.ResourceName(k)]; !ok {
			return k, true
		}
	}
	return "", false
}

// missingClaims checks gpuadmit's pod claims and the containers' references.
func (w *Written) missingClaims(pod *corev1.Pod) []string {
	var out []string
	have := map[string]string{}
	for i, c := range pod.Spec.ResourceClaims {
		if !IsOwnClaim(c) {
			continue
		}
		have[c.Name] = *c.ResourceClaimTemplateName
		if w.Claims[c.Name] != have[c.Name] {
			out = append(out, fmt.Sprintf("spec.resourceClaims[%d]", i))
		}
	}
	for name := range w.Claims {
		if _, ok := have[name]; !ok {
			out = append(out, fmt.Sprintf("spec.resourceClaims[name=%s]", name))
		}
	}
	for _, c := range AllContainers(pod) {
		for _, ref := range w.ClaimRefs[c.Name] {
			if !slices.ContainsFunc(c.Resources.Claims, func(r corev1.ResourceClaim) bool { return r.Name == ref }) {
				out = append(out, fmt.Sprintf("%s.resources.claims[name=%s]", containerPath(pod, c.Name), ref))
			}
		}
	}
	return out
}

// MissingEntries lists, as path[key] and sorted, the keys of want that
// have another value (or none) in have.
func MissingEntries(path string, have, want map[string]string) []string {
	var out []string
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			out = append(out, fmt.Sprintf("%s[%s]", path, k))
		}
	}
	sort.Strings(out)
	return out
}

// ExcludesNamedPools reports whether every required node-affinity term
// carries NotInNamedPool, as gpuadmit writes them.
func ExcludesNamedPools(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for _, t := range terms {
		if !HasRequirement(t.MatchExpressions, NotInNamedPool) {
			return false
		}
	}
	return len(terms) > 0
}

// AllContainers are the pod's init and app containers (copies).
func AllContainers(pod *corev1.Pod) []corev1.Container {
	return append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...)
}

// containerPath is the field path of the container named name.
func containerPath(pod *corev1.Pod, name string) string {
	for i, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return fmt.Sprintf("spec.initContainers[%d]", i)
		}
	}
	for i, c := range pod.Spec.Containers {
		if c.Name == name {
			return fmt.Sprintf("spec.containers[%d]", i)
		}
	}
	return "spec.containers[name=" + name + "]"
}
