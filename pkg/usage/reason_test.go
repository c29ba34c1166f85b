package usage_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/usage"
)

func TestReasonOf(t *testing.T) {
	unschedulable := func(msg string) corev1.PodStatus {
		return corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg}}}
	}
	tests := map[string]struct {
		spec   corev1.PodSpec
		status corev1.PodStatus
		want   usage.Reason
	}{
		"no condition yet": {want: usage.ReasonNotTried},
		"scheduling gates": {spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}}}, want: usage.ReasonGated},
		"nominated":        {status: corev1.PodStatus{NominatedNodeName: "n1"}, want: usage.ReasonPreempting},
		"insufficient GPU beats a taint": {
			status: unschedulable("0/5 nodes are available: 2 node(s) had untolerated taint {a: b}, 3 Insufficient nvidia.com/gpu. preemption: 0/5 nodes are available: 5 No preemption victims found for incoming pod."),
			want:   usage.ReasonGPU,
		},
		"insufficient MIG slice": {status: unschedulable("0/1 nodes are available: 1 Insufficient nvidia.com/mig-1g.10gb."), want: usage.ReasonGPU},
		"DRA claims":             {status: unschedulable("0/2 nodes are available: 2 cannot allocate all claims."), want: usage.ReasonGPU},
		"gpuadmit-scheduler's per-GPU refusal": {
			status: unschedulable("0/1 nodes are available: 1 container main asks 12 gpuadmit.io/gpu-mem, more than the 8 one GPU of the node offers."),
			want:   usage.ReasonGPU,
		},
		"insufficient CPU only": {status: unschedulable("0/3 nodes are available: 3 Insufficient cpu."), want: usage.ReasonCPUMemory},
		"selector":              {status: unschedulable("0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."), want: usage.ReasonSelector},
		"taint":                 {status: unschedulable("0/3 nodes are available: 3 node(s) had untolerated taint {gpu: true}."), want: usage.ReasonTaint},
		"an accounting resource is GPU": {
			status: unschedulable("0/3 nodes are available: 3 Insufficient gpuadmit.io/gpu-memory-mib."), want: usage.ReasonGPU,
		},
		"something else": {status: unschedulable("0/3 nodes are available: 3 node(s) had volume node affinity conflict."), want: usage.ReasonOther},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			p := &corev1.Pod{Spec: tt.spec, Status: tt.status}
			if got := usage.ReasonOf(p); got != tt.want {
				t.Errorf("ReasonOf = %s, want %s", got, tt.want)
			}
		})
	}
}
