package replay

import (
	"testing"

	"github.com/gpuadmit/gpuadmit/pkg/webhook"
)

// TestProductConfigurationsRunTheirWebhook checks what each product-path
// configuration asks of gpuadmit's webhook: DRA alternatives or one pool,
// and, on one pool, the policy's order (the webhook before the pick by
// expected demand) or the pick by expected demand.
func TestProductConfigurationsRunTheirWebhook(t *testing.T) {
	for config, want := range map[string]struct {
		onePool bool
		pick    webhook.PoolPick
	}{
		ProductGPUAdmit: {false, ""},
		ProductStock:    {false, ""},
		ProductOnePool:  {true, webhook.PickOrder},
		ProductPick:     {true, webhook.PickExpected},
	} {
		s, err := schedulerConfig(config, "../..")
		if err != nil {
			t.Fatalf("%s: %v", config, err)
		}
		co := clusterOptions(Options{}, s, "")
		got := co.PoolPick
		if co.NoDRAAlternatives != want.onePool || got != want.pick {
			t.Errorf("%s: one pool %v, pick %q; want %v, %q", config, co.NoDRAAlternatives, got, want.onePool, want.pick)
		}
	}
}
