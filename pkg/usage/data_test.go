package usage_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuadmit/gpuadmit/pkg/policy"
	"github.com/gpuadmit/gpuadmit/pkg/usage"
)

func TestFromData(t *testing.T) {
	doc := func(u any) map[string]any { return map[string]any{"gpuadmit": map[string]any{"usage": u}} }
	tests := map[string]struct {
		data    map[string]any
		want    usage.Config
		wantErr string
	}{
		"absent": {data: map[string]any{}, want: usage.Config{}},
		"prices and sizes": {
			data: doc(map[string]any{
				"pricePerGPUHour": map[string]any{"H100-80GB": 2.5},
				"sizes":           []any{map[string]any{"gpuMemory": "10Gi", "cpu": "500m", "memory": "8Gi"}, map[string]any{"gpuMemory": "80Gi", "gpus": 8}},
			}),
			want: usage.Config{PricePerGPUHour: map[string]float64{"H100-80GB": 2.5}, Sizes: []usage.Size{
				{GPUMemoryMiB: 10240, GPUs: 1, MilliCPU: 500, MemoryMiB: 8192}, {GPUMemoryMiB: 81920, GPUs: 8},
			}},
		},
		"a size without memory": {
			data:    doc(map[string]any{"sizes": []any{map[string]any{"gpuMemory": "10Gi"}, map[string]any{"cpu": "1"}}}),
			wantErr: "data.gpuadmit.usage.sizes[1].gpuMemory",
		},
		"a negative price": {
			data: doc(map[string]any{"pricePerGPUHour": map[string]any{"T4": -1}}), wantErr: "data.gpuadmit.usage.pricePerGPUHour[T4]",
		},
		"zero GPUs": {data: doc(map[string]any{"sizes": []any{map[string]any{"gpuMemory": "1Gi", "gpus": 0}}}), wantErr: "sizes[0].gpus"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := usage.FromData(tt.data)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// The default policy set's usage data is readable.
func TestDefaultPolicyData(t *testing.T) {
	set, err := policy.Compile(context.Background(), policy.Embedded())
	if err != nil {
		t.Fatal(err)
	}
	c, err := usage.FromData(set.Data)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Sizes) == 0 || c.Sizes[0].GPUMemoryMiB != 8192 {
		t.Errorf("sizes = %+v, want the default set's, smallest 8Gi first", c.Sizes)
	}
}
