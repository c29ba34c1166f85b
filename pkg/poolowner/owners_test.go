package poolowner

import (
	"testing"

	"github.com/google/go-cmp/cmp"
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
