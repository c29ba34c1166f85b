package replay

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// The pacing waits while too many created pods are unsettled, goes on once
// one binds, and fails, instead of waiting for ever, once a pod it may be
// waiting for was deleted.
func TestPacingWaitsForSettledPodsAndFailsOnADeletedOne(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := fake.NewClientset()
	s, err := watchSettled(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace}}
	}
	for _, n := range []string{"a", "b"} {
		if _, err := cs.CoreV1().Pods(Namespace).Create(ctx, pod(n), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	short, stop := context.WithTimeout(ctx, 200*time.Millisecond)
	if err := s.waitBelow(short, 2, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("two pods waiting, at most one may: %v, want to wait until the deadline", err)
	}
	stop()
	bound := pod("a")
	bound.Spec.NodeName = "n1"
	if _, err := cs.CoreV1().Pods(Namespace).Update(ctx, bound, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	short, stop = context.WithTimeout(ctx, 5*time.Second)
	defer stop()
	if err := s.waitBelow(short, 2, 1); err != nil {
		t.Fatalf("one of two pods bound: %v, want to go on", err)
	}
	if err := cs.CoreV1().Pods(Namespace).Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.waitBelow(short, 3, 1); !errors.Is(err, errPodsGone) {
		t.Fatalf("a pod deleted: %v, want %v", err, errPodsGone)
	}
}
