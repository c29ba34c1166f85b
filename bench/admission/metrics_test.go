package admission

import "testing"

// TestAboveCountsOnlyAtABucketBound: the cycles over a bound are read
// exactly at a bucket bound, and refused between two, where the buckets
// cannot tell.
func TestAboveCountsOnlyAtABucketBound(t *testing.T) {
	m, err := ParseMetrics([]byte(`# TYPE d histogram
d_bucket{le="0.000865"} 90
d_bucket{le="0.001"} 96
d_bucket{le="0.0013"} 99
d_bucket{le="+Inf"} 100
d_sum 0.05
d_count 100
`))
	if err != nil {
		t.Fatal(err)
	}
	h := m.Histogram("d", nil)
	if n, ok := h.Above(0.001); !ok || n != 4 {
		t.Errorf("Above(0.001) = %v, %v; want 4 cycles, true", n, ok)
	}
	if n, ok := h.Above(0.0009); ok {
		t.Errorf("Above(0.0009), between two bounds, = %v, true; want false", n)
	}
}
