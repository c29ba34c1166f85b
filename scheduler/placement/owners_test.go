package placement

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpuadmit/gpuadmit/pkg/poolowner"
)

// TestPreFilterRefusesAPoolTheRecordDoesNotGiveIt: GPUAdmit refuses, at
// PreFilter, a pod gpuadmit placed on a pool that gpuadmit's record does
// not give gpuadmit-scheduler now (a webhook replica with a stale cache
// admitted it), follows the record as the controller changes it, and
// leaves pods gpuadmit did not place alone.
func TestPreFilterRefusesAPoolTheRecordDoesNotGiveIt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultRecordNamespace, Name: poolowner.ConfigMapName},
		Data: map[string]string{"other-pools": "gpuadmit-scheduler", "pool.t4": "default-scheduler"}}
	c := fake.NewClientset(cm)
	o, err := followRecord(ctx, c, DefaultRecordNamespace)
	if err != nil {
		t.Fatal(err)
	}
	pl := &Plugin{owners: o, work: &workload{}}
	on := func(pool string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "team-a"}}
		if pool != "" {
			p.Annotations = map[string]string{poolowner.AnnotationDecision: "main: 1 whole GPU -> nvidia.com/gpu=1" + poolowner.PoolMark + pool + poolowner.RevisionMark + "r1"}
		}
		return p
	}
	code := func(p *corev1.Pod) fwk.Code {
		_, st := pl.PreFilter(ctx, nil, p, nil)
		return st.Code()
	}
	deadline := time.Now().Add(10 * time.Second)
	for !o.synced() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := code(on("t4")); got != fwk.UnschedulableAndUnresolvable {
		t.Errorf("a pod of pool t4, which the record gives the stock scheduler: PreFilter %v, want UnschedulableAndUnresolvable", got)
	}
	if got := code(on("a100")); got == fwk.UnschedulableAndUnresolvable || got == fwk.Unschedulable {
		t.Errorf("a pod of pool a100, which the record gives gpuadmit-scheduler: PreFilter %v, want it let through", got)
	}
	if got := code(on("")); got == fwk.UnschedulableAndUnresolvable || got == fwk.Unschedulable {
		t.Errorf("a pod gpuadmit did not place: PreFilter %v, want it let through", got)
	}
	alternatives := func(pools string) *corev1.Pod {
		p := on("")
		p.Annotations = map[string]string{poolowner.AnnotationDecision: "main: 8192 MiB -> the first available of …" + poolowner.AltPoolsMark + pools + poolowner.RevisionMark + "r1"}
		return p
	}
	if got := code(alternatives("a100, h100")); got == fwk.UnschedulableAndUnresolvable || got == fwk.Unschedulable {
		t.Errorf("a pod of DRA alternatives on pools the record gives gpuadmit-scheduler: PreFilter %v, want it let through", got)
	}
	if got := code(alternatives("a100, t4")); got != fwk.UnschedulableAndUnresolvable {
		t.Errorf("a pod of DRA alternatives, one on pool t4, which the record gives the stock scheduler: PreFilter %v, want UnschedulableAndUnresolvable", got)
	}
	cm.Data = map[string]string{"other-pools": "default-scheduler", "pool.t4": "gpuadmit-scheduler"}
	if _, err := c.CoreV1().ConfigMaps(DefaultRecordNamespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for code(on("a100")) != fwk.UnschedulableAndUnresolvable && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := code(on("a100")); got != fwk.UnschedulableAndUnresolvable {
		t.Errorf("after the record gave a100 to the stock scheduler: PreFilter %v, want UnschedulableAndUnresolvable", got)
	}
	if got := code(on("t4")); got == fwk.UnschedulableAndUnresolvable {
		t.Errorf("after the record gave t4 to gpuadmit-scheduler: PreFilter still refuses it")
	}
}
