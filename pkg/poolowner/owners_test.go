package poolowner

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// TestOwnersRoundTripThroughTheConfigMap: the record reads back as written,
// and a value that is no state is refused naming the key.
func TestOwnersRoundTripThroughTheConfigMap(t *testing.T) {
	o := Owners{Others: Owned, Pools: map[string]State{"a100-mig": Stock, "t4": Releasing, "h100": Owned}}
	got, err := Parse(o.Data())
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(o) || got.Of("h100") != Owned || got.Of("a100-mig") != Stock || got.Of("new") != Owned {
		t.Errorf("Parse(Data()) = %s, want %s", got, o)
	}
	if (Owners{}).Of("any") != Stock {
		t.Error("the zero record gives a pool to gpuadmit-scheduler")
	}
	_, err = Parse(map[string]string{"pool.t4": "kai-scheduler"})
	if err == nil || !cmp.Equal(err.Error(), `gpuadmit-scheduler-pools: pool.t4="kai-scheduler": want gpuadmit-scheduler, default-scheduler or releasing`) {
		t.Errorf("Parse of an unknown state: err = %v", err)
	}
}

// TestPoolsOfReadsTheDecisionRecord: a pod placed on one pool waits on it;
// one placed by DRA alternatives on every pool they name.
func TestPoolsOfReadsTheDecisionRecord(t *testing.T) {
	tests := map[string]struct {
		decision string
		want     []string
	}{
		"one pool":     {"main: 1 GPU -> nvidia.com/gpu=1 [r]; pool a100; revision git-1", []string{"a100"}},
		"alternatives": {"main: 8192 MiB -> the first available of 1) … on pool h100 [r] (charged 9984 MiB); alternatives on pools h100, a100; revision git-1", []string{"h100", "a100"}},
		"no record":    {"", nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{}
			pod.Annotations = map[string]string{AnnotationDecision: tc.decision}
			if diff := cmp.Diff(tc.want, PoolsOf(pod)); diff != "" {
				t.Errorf("PoolsOf (-want +got):\n%s", diff)
			}
		})
	}
}
