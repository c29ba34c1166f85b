package webhook

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/gpuadmit/gpuadmit/pkg/mutate"
)

// recorded is what an Event says and about which object.
type recorded struct {
	Regarding corev1.ObjectReference
	Type      string
	Reason    string
}

// eventLog keeps the Events recorded, with the object each regards.
type eventLog struct{ got []recorded }

func (e *eventLog) Eventf(regarding, _ runtime.Object, typ, reason, _, _ string, _ ...any) {
	ref, ok := regarding.(*corev1.ObjectReference)
	if !ok {
		panic(fmt.Sprintf("an Event regards a %T, not a reference to an object that exists", regarding))
	}
	e.got = append(e.got, recorded{Regarding: *ref, Type: typ, Reason: reason})
}

func TestDecisionEvents(t *testing.T) {
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train"}}
	made := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", GenerateName: "train-7d9f-", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "v1", Kind: "ConfigMap", Name: "not-the-controller", UID: "u0"},
		{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "train-7d9f", UID: "u1", Controller: ptr.To(true)},
	}}}
	ns := corev1.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: "team-a", Namespace: "team-a"}
	rs := corev1.ObjectReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "train-7d9f", UID: "u1", Namespace: "team-a"}
	admitted := mutate.Result{Allowed: true, Explanation: "ok"}
	tests := map[string]struct {
		pod      *corev1.Pod
		res      mutate.Result
		admitted bool // --pod-events
		want     []recorded
	}{
		"a controller's pod is denied: its ReplicaSet": {
			pod: made, res: mutate.Result{Message: "no"},
			want: []recorded{{rs, corev1.EventTypeWarning, ReasonDenied}},
		},
		"a bare pod is denied: its namespace, the pod does not exist yet": {
			pod: bare, res: mutate.Result{Message: "no"},
			want: []recorded{{ns, corev1.EventTypeWarning, ReasonDenied}},
		},
		"a success records nothing by default": {pod: made, res: admitted},
		"a success with --pod-events": {
			pod: made, res: admitted, admitted: true,
			want: []recorded{{rs, corev1.EventTypeNormal, ReasonAdmitted}},
		},
		"a warning": {
			pod: bare, res: mutate.Result{Allowed: true, Warnings: []string{"memory is not isolated"}},
			want: []recorded{{ns, corev1.EventTypeWarning, ReasonWarning}},
		},
		"a fallback": {
			pod: made, res: mutate.Result{Allowed: true, PassedOver: []string{"pool a100-mig: full"}},
			want: []recorded{{rs, corev1.EventTypeNormal, ReasonFallback}},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			ev := &eventLog{}
			recorder{ev: ev, admitted: tt.admitted}.Decision(tt.pod, tt.res)
			if diff := cmp.Diff(tt.want, ev.got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}
