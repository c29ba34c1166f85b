package allocator

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBestFit(t *testing.T) {
	tests := map[string]struct {
		free   []int64
		need   int64
		want   int
		wantOK bool
	}{
		"the fullest GPU that still fits":       {free: []int64{79, 20, 10}, need: 15, want: 1, wantOK: true},
		"an exact fit beats a larger hole":      {free: []int64{30, 10}, need: 10, want: 1, wantOK: true},
		"a GPU too full is skipped":             {free: []int64{5, 79}, need: 10, want: 1, wantOK: true},
		"ties go to the lower index":            {free: []int64{40, 40}, need: 40, want: 0, wantOK: true},
		"nothing holds more than the largest":   {free: []int64{79, 79}, need: 80, wantOK: false},
		"a request never spans GPUs":            {free: []int64{40, 40}, need: 41, wantOK: false},
		"no GPUs fit nothing":                   {free: nil, need: 1, wantOK: false},
		"a zero need is no request":             {free: []int64{10}, need: 0, wantOK: false},
		"a negative need is no request":         {free: []int64{10}, need: -1, wantOK: false},
		"an exhausted GPU is never chosen":      {free: []int64{0, 3}, need: 1, want: 1, wantOK: true},
		"one unit goes to the most used GPU":    {free: []int64{79, 1, 2}, need: 1, want: 1, wantOK: true},
		"a whole GPU goes to the untouched one": {free: []int64{78, 79}, need: 79, want: 1, wantOK: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := BestFit(tc.free, tc.need)
			if ok != tc.wantOK || (ok && got != tc.want) {
				t.Errorf("BestFit(%v, %d) = %d, %v; want %d, %v", tc.free, tc.need, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestPack(t *testing.T) {
	tests := map[string]struct {
		free    []int64
		needs   []int64
		want    []int
		wantErr error
	}{
		"two containers share the fuller GPU": {free: []int64{79, 30}, needs: []int64{10, 20}, want: []int{1, 1}},
		"the second spills when the first filled the GPU": {
			free: []int64{79, 30}, needs: []int64{20, 20}, want: []int{1, 0},
		},
		"a large container keeps the empty GPU whole": {
			free: []int64{79, 79, 40}, needs: []int64{30, 79, 10}, want: []int{2, 0, 2},
		},
		"a need that fits nowhere fails": {free: []int64{79, 79}, needs: []int64{60, 60, 60}, wantErr: ErrNoFit},
		"no needs, no placements":        {free: []int64{79}, needs: nil, want: []int{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := append([]int64(nil), tc.free...)
			got, err := Pack(tc.free, tc.needs)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Pack error = %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Pack (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.free); diff != "" {
				t.Errorf("Pack changed its input (-before +after):\n%s", diff)
			}
		})
	}
}

// BenchmarkPack places a day's worth of mixed share requests on a node of
// eight H100s (79 units of 1024 MiB each), the scheduler-side shape.
func BenchmarkPack(b *testing.B) {
	free := []int64{79, 79, 79, 79, 79, 79, 79, 79}
	needs := []int64{10, 20, 40, 5, 79, 16, 8, 30, 2, 64, 12, 24}
	for b.Loop() {
		if _, err := Pack(free, needs); err != nil {
			b.Fatal(err)
		}
	}
}
