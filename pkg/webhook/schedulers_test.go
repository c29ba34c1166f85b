package webhook

import (
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpuadmit/gpuadmit/pkg/handover"
)

// TestSchedulersFollowTheRecord: the webhook gives gpuadmit-scheduler the
// pools the controller's record gives it, none before a record is seen or
// after it is deleted, and keeps the last good record when one does not
// parse.
func TestSchedulersFollowTheRecord(t *testing.T) {
	s := &schedulers{lease: handover.NewLease(clocktesting.NewFakePassiveClock(metav1.Now().Time)), log: logr.Discard()}
	h := s.RecordHandler()
	if got := s.PoolOwner("a100"); got != "default-scheduler" {
		t.Errorf("before any record, PoolOwner = %q, want default-scheduler", got)
	}
	cm := func(data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "gpuadmit-system", Name: handover.ConfigMapName}, Data: data}
	}
	h.OnAdd(cm(map[string]string{"other-pools": "gpuadmit-scheduler", "pool.t4": "releasing"}), false)
	if a, t4 := s.PoolOwner("a100"), s.PoolOwner("t4"); a != "gpuadmit-scheduler" || t4 != "releasing" {
		t.Errorf("PoolOwner a100 %q, t4 %q; want gpuadmit-scheduler, releasing", a, t4)
	}
	h.OnUpdate(nil, cm(map[string]string{"other-pools": "kai-scheduler"}))
	if got := s.PoolOwner("a100"); got != "gpuadmit-scheduler" {
		t.Errorf("after a record that does not parse, PoolOwner = %q, want the last good record's gpuadmit-scheduler", got)
	}
	h.OnDelete(cm(nil))
	if got := s.PoolOwner("a100"); got != "default-scheduler" {
		t.Errorf("after the record is deleted, PoolOwner = %q, want default-scheduler", got)
	}
}
