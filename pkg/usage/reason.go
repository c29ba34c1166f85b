package usage

import (
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// Reason is why a GPU pod waits, one of a fixed set, so that the pending
// series stay few whatever the schedulers write.
type Reason string

// The reasons a GPU pod waits, in the order ReasonOf tries them: a pod the
// scheduler refused for several reasons counts under the first, GPU first.
const (
	// ReasonGated: the pod has scheduling gates (a queue such as Kueue holds it).
	ReasonGated Reason = "gated"
	// ReasonPreempting: the scheduler nominated a node and waits for victims to leave.
	ReasonPreempting Reason = "preempting"
	// ReasonGPU: no node has the GPU (resource, slice, share or device) it asks.
	ReasonGPU Reason = "insufficient_gpu"
	// ReasonCPUMemory: GPU is free somewhere, but not with the CPU or memory it asks.
	ReasonCPUMemory Reason = "insufficient_cpu_memory"
	// ReasonSelector: no node matches its node selector or affinity.
	ReasonSelector Reason = "node_selector"
	// ReasonTaint: the nodes that could take it have taints it does not tolerate.
	ReasonTaint Reason = "taint"
	// ReasonNotTried: no scheduler has said anything about it yet (none
	// owns it, or it is in the queue).
	ReasonNotTried Reason = "not_tried"
	// ReasonOther: the scheduler said something none of the above matches.
	ReasonOther Reason = "other"
)

// Reasons are every Reason, in ReasonOf's order.
var Reasons = []Reason{ReasonGated, ReasonPreempting, ReasonGPU, ReasonCPUMemory, ReasonSelector, ReasonTaint, ReasonNotTried, ReasonOther}

// gpuPhrases mark a GPU shortage in kube-scheduler's and gpuadmit-scheduler's
// messages, besides "Insufficient <GPU resource>": the DynamicResources
// plugin's, and the placement plugin's per-GPU refusal.
var gpuPhrases = []string{"cannot allocate all claims", "resourceclaim", "one gpu of the node offers"}

// ReasonOf is why the pending pod p waits, read from its PodScheduled
// condition (the scheduler's free text) and its spec.
func ReasonOf(p *corev1.Pod) Reason {
	if len(p.Spec.SchedulingGates) > 0 {
		return ReasonGated
	}
	if p.Status.NominatedNodeName != "" {
		return ReasonPreempting
	}
	for _, c := range p.Status.Conditions {
		if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionFalse {
			continue
		}
		if c.Reason == corev1.PodReasonSchedulingGated {
			return ReasonGated
		}
		return fromMessage(c.Message)
	}
	return ReasonNotTried
}

// insufficient finds kube-scheduler's "Insufficient <resource>" (NodeResourcesFit).
var insufficient = regexp.MustCompile(`Insufficient ([A-Za-z0-9.\-/]*[A-Za-z0-9])`)

// fromMessage maps a scheduler's message onto a Reason.
func fromMessage(msg string) Reason {
	low := strings.ToLower(msg)
	for _, m := range insufficient.FindAllStringSubmatch(msg, -1) {
		if inventory.IsGPUResource(m[1]) {
			return ReasonGPU
		}
	}
	for _, ph := range gpuPhrases {
		if strings.Contains(low, ph) {
			return ReasonGPU
		}
	}
	switch {
	case strings.Contains(msg, "Insufficient cpu"), strings.Contains(msg, "Insufficient memory"):
		return ReasonCPUMemory
	case strings.Contains(low, "node affinity/selector"):
		return ReasonSelector
	case strings.Contains(low, "untolerated taint"):
		return ReasonTaint
	}
	return ReasonOther
}
