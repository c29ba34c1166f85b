package mutate

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// classes is a PriorityClassGetter over a fixed set; err fails every read.
type classes struct {
	set map[string]schedulingv1.PriorityClass
	err error
}

func (c classes) PriorityClass(_ context.Context, name string) (*schedulingv1.PriorityClass, bool, error) {
	if c.err != nil {
		return nil, false, c.err
	}
	pc, ok := c.set[name]
	return &pc, ok, nil
}

// clusterDefault is a class with globalDefault: the API server's Priority
// plugin writes it into every pod that names no class.
func clusterDefault(name string, value int32) schedulingv1.PriorityClass {
	pc := priorityClass(name, value, nil)
	pc.GlobalDefault = true
	return pc
}

func priorityClass(name string, value int32, policy *corev1.PreemptionPolicy) schedulingv1.PriorityClass {
	return schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value, PreemptionPolicy: policy}
}

// priorityFields is what the Priority plugin checks: the class, the value and the preemption policy.
type priorityFields struct {
	Class    string
	Priority *int32
	Policy   *corev1.PreemptionPolicy
}

func TestPriorityResolvedFromClass(t *testing.T) {
	never, lower := corev1.PreemptNever, corev1.PreemptLowerPriority
	known := map[string]schedulingv1.PriorityClass{
		"gpuadmit-batch":    priorityClass("gpuadmit-batch", 100, &never),
		"gpuadmit-training": priorityClass("gpuadmit-training", 1000, nil),
		"cluster-default":   clusterDefault("cluster-default", 5),
		"team-choice":       priorityClass("team-choice", 7, nil),
	}
	i100, i1000, zero := int32(100), int32(1000), int32(0)
	tests := map[string]struct {
		class   string // gpuadmit.io/class
		ownName string // the pod's own priorityClassName, filled by the Priority plugin with zero
		getter  PriorityClassGetter
		want    priorityFields
		denied  bool // the policy refuses the pod's own class as a conflict
	}{
		"the class's value and policy": {
			class: "batch", getter: classes{set: known},
			want: priorityFields{"gpuadmit-batch", &i100, &never},
		},
		"a class without policy gets the API's default": {
			class: "training", getter: classes{set: known},
			want: priorityFields{"gpuadmit-training", &i1000, &lower},
		},
		"a class the cluster lacks is denied": {
			class: "batch", getter: classes{},
			want: priorityFields{"", &zero, &never}, denied: true,
		},
		"a failed read is left to the API server": {
			class: "batch", getter: classes{err: errors.New("cache not synced")},
			want: priorityFields{"gpuadmit-batch", nil, nil},
		},
		"no getter (offline) is left to the API server": {
			class: "batch",
			want:  priorityFields{"gpuadmit-batch", nil, nil},
		},
		"the cluster's global default counts as unset": {
			class: "training", ownName: "cluster-default", getter: classes{set: known},
			want: priorityFields{"gpuadmit-training", &i1000, &lower},
		},
		"the global default stays on a pod the policy gives no class": {
			ownName: "cluster-default", getter: classes{set: known},
			want: priorityFields{"cluster-default", &zero, &never},
		},
		"a class the author chose still conflicts": {
			class: "training", ownName: "team-choice", getter: classes{set: known},
			want: priorityFields{"team-choice", &zero, &never}, denied: true,
		},
		"the pod's own class is kept with its values": {
			class: "batch", ownName: "gpuadmit-batch", getter: classes{set: known},
			want: priorityFields{"gpuadmit-batch", &zero, &never},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			p := pod("p", map[string]string{"nvidia.com/gpu": "1"})
			if tt.class != "" {
				p.Labels = map[string]string{"gpuadmit.io/class": tt.class}
			}
			p.Spec.PriorityClassName = tt.ownName
			p.Spec.Priority, p.Spec.PreemptionPolicy = &zero, &never
			m := NewMutator(defaultEngine, StaticInventory{Inv: inventory.Build([]corev1.Node{a100Whole}, allocator.Default())},
				MutatorOptions{PriorityClasses: tt.getter})
			res := mustMutate(t, m, p)
			s := res.Pod.Spec
			if diff := cmp.Diff(tt.want, priorityFields{s.PriorityClassName, s.Priority, s.PreemptionPolicy}); diff != "" || res.Allowed == tt.denied {
				t.Errorf("allowed %v, message %q, priority fields (-want +got):\n%s", res.Allowed, res.Message, diff)
			}
		})
	}
}

// The denial of a class the cluster lacks names the class, where the name
// came from and how to create it, not the API server's bare refusal.
func TestMissingPriorityClassMessage(t *testing.T) {
	p := pod("p", map[string]string{"nvidia.com/gpu": "1"})
	p.Labels = map[string]string{"gpuadmit.io/class": "training"}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"gpuadmit.io/priority.training": "team-a-training"}}}
	m := NewMutator(defaultEngine, StaticInventory{Inv: inventory.Build([]corev1.Node{a100Whole}, allocator.Default())},
		MutatorOptions{PriorityClasses: classes{set: map[string]schedulingv1.PriorityClass{"gpuadmit-training": priorityClass("gpuadmit-training", 1000, nil)}}})
	res, err := m.Mutate(context.Background(), Request{Pod: p, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	if res.Allowed {
		t.Fatalf("allowed with PriorityClass %q, which the cluster lacks", res.Pod.Spec.PriorityClassName)
	}
	for _, want := range []string{`PriorityClass "team-a-training"`, "does not exist", "class training", "kubectl create priorityclass team-a-training", "gpuadmit.io/priority.<class>"} {
		if !strings.Contains(res.Message, want) {
			t.Errorf("message %q does not say %q", res.Message, want)
		}
	}
}
