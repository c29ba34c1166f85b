package webhook

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
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
type eventLog struct {
	got     []recorded
	related []*corev1.ObjectReference
	notes   []string
}

func (e *eventLog) Eventf(regarding, related runtime.Object, typ, reason, _, note string, args ...any) {
	ref, ok := regarding.(*corev1.ObjectReference)
	if !ok {
		panic(fmt.Sprintf("an Event regards a %T, not a reference to an object that exists", regarding))
	}
	e.got = append(e.got, recorded{Regarding: *ref, Type: typ, Reason: reason})
	rel, _ := related.(*corev1.ObjectReference)
	e.related = append(e.related, rel)
	e.notes = append(e.notes, fmt.Sprintf(note, args...))
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

// sink is an events.EventSink that keeps what client-go's broadcaster
// writes: new Events, and patches that count a repeat into a series.
type sink struct {
	mu      sync.Mutex
	created []*eventsv1.Event
	patched int
}

func (s *sink) Create(_ context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.created = append(s.created, ev.DeepCopy())
	return ev, nil
}

func (s *sink) Update(_ context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) { return ev, nil }

func (s *sink) Patch(_ context.Context, ev *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.patched++
	return ev, nil
}

func (s *sink) writes() (notes []string, patched int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range s.created {
		notes = append(notes, ev.Note)
	}
	return notes, s.patched
}

// TestDenialsOfDifferentPodsDoNotMerge records through client-go's own
// events broadcaster, which merges Events it finds alike into a series that
// keeps the first note: two pods denied in one namespace are two Events,
// each naming its pod, and only one pod's repeat joins its series.
func TestDenialsOfDifferentPodsDoNotMerge(t *testing.T) {
	s := &sink{}
	b := events.NewBroadcaster(s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown()
	r := recorder{ev: b.NewRecorder(runtime.NewScheme(), "gpuadmit-webhook")}
	infer := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "infer"}}
	train := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train"}}
	r.Decision(infer, mutate.Result{Explanation: "Denied: the cluster has no GPU pools"})
	waitWrites(t, s, 1, 0)
	r.Decision(train, mutate.Result{Explanation: "Denied: no pool has 200 GiB"})
	waitWrites(t, s, 2, 0)
	r.Decision(train, mutate.Result{Explanation: "Denied: no pool has 200 GiB"})
	notes := waitWrites(t, s, 2, 1)
	want := []string{"Pod infer: Denied: the cluster has no GPU pools", "Pod train: Denied: no pool has 200 GiB"}
	if diff := cmp.Diff(want, notes); diff != "" {
		t.Errorf("Events created (-want +got):\n%s", diff)
	}
}

// waitWrites waits until the sink holds the Events and patches wanted, and
// fails if it holds more, or fewer after a few seconds.
func waitWrites(t *testing.T, s *sink, created, patched int) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		notes, p := s.writes()
		if len(notes) > created || p > patched {
			t.Fatalf("%d Events created (%q) and %d patched into a series; want %d and %d", len(notes), notes, p, created, patched)
		}
		if len(notes) == created && p == patched {
			return notes
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 5s, %d Events created (%q) and %d patched into a series; want %d and %d", len(notes), notes, p, created, patched)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
