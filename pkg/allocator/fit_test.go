package allocator

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// mustModel returns the built-in model called name or stops the test.
func mustModel(t testing.TB, name string) Model {
	t.Helper()
	m, ok := Default().Model(name)
	if !ok {
		t.Fatalf("no model %q in the default catalog", name)
	}
	return m
}

func TestFitMemory(t *testing.T) {
	tests := map[string]struct {
		model   string
		mib     int64
		want    string
		wantErr error
	}{
		"10240 MiB on A100-40GB skips 2g.10gb of 9856 MiB":  {model: "A100-40GB", mib: 10240, want: "3g.20gb"},
		"9856 MiB on A100-40GB takes the 1-compute 1g.10gb": {model: "A100-40GB", mib: 9856, want: "1g.10gb"},
		"4864 MiB on A100-40GB is 1g.5gb, not +me":          {model: "A100-40GB", mib: 4864, want: "1g.5gb"},
		"1 MiB on H100 is the smallest plain profile":       {model: "H100-80GB", mib: 1, want: "1g.10gb"},
		"9984 MiB on H100 fits 1g.10gb exactly":             {model: "H100-80GB", mib: 9984, want: "1g.10gb"},
		"9985 MiB on H100 needs 1g.20gb":                    {model: "H100-80GB", mib: 9985, want: "1g.20gb"},
		"10240 MiB on H100 never gets 9984 MiB":             {model: "H100-80GB", mib: 10240, want: "1g.20gb"},
		"20097 MiB on H100 needs 3g.40gb":                   {model: "H100-80GB", mib: 20097, want: "3g.40gb"},
		"81152 MiB on H100 is the whole 7g.80gb":            {model: "H100-80GB", mib: 81152, want: "7g.80gb"},
		"81153 MiB on H100 fits nothing":                    {model: "H100-80GB", mib: 81153, wantErr: ErrNoFit},
		"16000 MiB on H200 fits 1g.18gb":                    {model: "H200-141GB", mib: 16000, want: "1g.18gb"},
		"16385 MiB on H200 needs 1g.35gb":                   {model: "H200-141GB", mib: 16385, want: "1g.35gb"},
		"6000 MiB on A30 needs 2g.12gb":                     {model: "A30-24GB", mib: 6000, want: "2g.12gb"},
		"11008 MiB on H100 NVL fits 1g.12gb":                {model: "H100-94GB", mib: 11008, want: "1g.12gb"},
		"a GPU without MIG fits nothing":                    {model: "T4", mib: 1024, wantErr: ErrNoFit},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := FitMemory(mustModel(t, tc.model).Profiles, tc.mib)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("FitMemory(%s, %d) error = %v, want %v", tc.model, tc.mib, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got.Name); diff != "" {
				t.Errorf("FitMemory(%s, %d) (-want +got):\n%s", tc.model, tc.mib, diff)
			}
		})
	}
}

func TestFitMemoryRejectsNonPositive(t *testing.T) {
	for _, mib := range []int64{0, -1, -1 << 62} {
		_, err := FitMemory(mustModel(t, "H100-80GB").Profiles, mib)
		if err == nil || errors.Is(err, ErrNoFit) {
			t.Errorf("FitMemory(H100, %d) error = %v, want a request error that is not ErrNoFit", mib, err)
		}
	}
}

func TestFitMemoryExtensionOnlyWhenAlone(t *testing.T) {
	me := mig("1g.10gb+me", 20, 1, 1, 9984, 16, 1, 0)
	plain := mig("1g.10gb", 19, 1, 1, 9984, 16, 7, 0)
	big := mig("7g.80gb", 0, 7, 8, 81152, 132, 1, 0)
	tests := map[string]struct {
		profiles []Profile
		want     string
	}{
		"plain twin wins the tie":             {profiles: []Profile{me, plain, big}, want: "1g.10gb"},
		"a larger plain profile beats +me":    {profiles: []Profile{me, big}, want: "7g.80gb"},
		"+me is taken when nothing else fits": {profiles: []Profile{me}, want: "1g.10gb+me"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := FitMemory(tc.profiles, 5000)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.Name); diff != "" {
				t.Errorf("FitMemory (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFitFraction(t *testing.T) {
	tests := map[string]struct {
		model   string
		milli   int64
		want    string
		wantErr bool
	}{
		"half an H100 is 4 of 8 slices":          {model: "H100-80GB", milli: 500, want: "3g.40gb"},
		"a whole H100 is 7g.80gb":                {model: "H100-80GB", milli: 1000, want: "7g.80gb"},
		"1m of an H100 rounds up to one slice":   {model: "H100-80GB", milli: 1, want: "1g.10gb"},
		"125m of an H100 is exactly one slice":   {model: "H100-80GB", milli: 125, want: "1g.10gb"},
		"126m of an H100 needs two slices":       {model: "H100-80GB", milli: 126, want: "1g.20gb"},
		"a quarter of an H100 is 1g.20gb":        {model: "H100-80GB", milli: 250, want: "1g.20gb"},
		"501m of an H100 needs all 8 slices":     {model: "H100-80GB", milli: 501, want: "7g.80gb"},
		"half an A30 is 2 of 4 slices":           {model: "A30-24GB", milli: 500, want: "2g.12gb"},
		"a quarter of an A30 is 1g.6gb, not +me": {model: "A30-24GB", milli: 250, want: "1g.6gb"},
		"half an A100-40GB is 3g.20gb":           {model: "A100-40GB", milli: 500, want: "3g.20gb"},
		"0m is not a fraction":                   {model: "H100-80GB", milli: 0, wantErr: true},
		"more than a GPU is not a fraction":      {model: "H100-80GB", milli: 1001, wantErr: true},
		"a GPU without MIG has no slices":        {model: "T4", milli: 500, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := mustModel(t, tc.model)
			got, err := FitFraction(m.Profiles, m.MemorySlices, tc.milli)
			if (err != nil) != tc.wantErr || errors.Is(err, ErrNoFit) {
				t.Fatalf("FitFraction(%s, %dm) error = %v, want error %v (never ErrNoFit here)", tc.model, tc.milli, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got.Name); diff != "" {
				t.Errorf("FitFraction(%s, %dm) (-want +got):\n%s", tc.model, tc.milli, diff)
			}
		})
	}
}

func TestFitFractionNoFit(t *testing.T) {
	m := mustModel(t, "H100-80GB")
	small := m.Profiles[:3] // up to 1g.20gb, two slices
	_, err := FitFraction(small, m.MemorySlices, 500)
	if !errors.Is(err, ErrNoFit) {
		t.Errorf("FitFraction without a 4-slice profile: error = %v, want ErrNoFit", err)
	}
}

func TestShareUnits(t *testing.T) {
	tests := map[string]struct {
		mib, unit, want int64
	}{
		"3000 MiB at 1024 is 3 units":     {mib: 3000, unit: 1024, want: 3},
		"3072 MiB at 1024 is 3 units":     {mib: 3072, unit: 1024, want: 3},
		"3073 MiB at 1024 is 4 units":     {mib: 3073, unit: 1024, want: 4},
		"1 MiB is a whole unit":           {mib: 1, unit: 1024, want: 1},
		"whole H100 at 1 GiB":             {mib: 81559, unit: 1024, want: 80},
		"the largest request cannot wrap": {mib: 1<<63 - 1, unit: 1, want: 1<<63 - 1},
		"no memory is no unit":            {mib: 0, unit: 1024, want: 0},
		"a zero unit gives 0":             {mib: 3000, unit: 0, want: 0},
		"a negative unit gives 0":         {mib: 3000, unit: -1024, want: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ShareUnits(tc.mib, tc.unit)); diff != "" {
				t.Errorf("ShareUnits(%d, %d) (-want +got):\n%s", tc.mib, tc.unit, diff)
			}
		})
	}
}

func TestFractionShareUnits(t *testing.T) {
	tests := map[string]struct {
		milli, gpu, unit, want int64
	}{
		"half a T4 at 1 GiB is 8 units":          {milli: 500, gpu: 15360, unit: 1024, want: 8},
		"a whole T4 at 1 GiB is 15 units":        {milli: 1000, gpu: 15360, unit: 1024, want: 15},
		"half an A10 rounds 11.24 GiB up to 12":  {milli: 500, gpu: 23028, unit: 1024, want: 12},
		"1m of an H100 is one unit":              {milli: 1, gpu: 81559, unit: 1024, want: 1},
		"a whole H100 is its 79 whole units":     {milli: 1000, gpu: 81559, unit: 1024, want: 79},
		"333m of 3000 MiB at 1 MiB is 999":       {milli: 333, gpu: 3000, unit: 1, want: 999},
		"333m of 3001 MiB at 1 MiB rounds up":    {milli: 333, gpu: 3001, unit: 1, want: 1000},
		"huge memory does not overflow":          {milli: 1000, gpu: 1<<63 - 1, unit: 1, want: 1<<63 - 1},
		"fraction above one GPU gives 0":         {milli: 1001, gpu: 15360, unit: 1024, want: 0},
		"zero fraction gives 0":                  {milli: 0, gpu: 15360, unit: 1024, want: 0},
		"zero unit gives 0":                      {milli: 500, gpu: 15360, unit: 0, want: 0},
		"GPU without memory gives 0":             {milli: 500, gpu: 0, unit: 1024, want: 0},
		"one unit per MiB is the MiB rounded up": {milli: 500, gpu: 15361, unit: 1, want: 7681},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := FractionShareUnits(tc.milli, tc.gpu, tc.unit)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("FractionShareUnits(%d, %d, %d) (-want +got):\n%s", tc.milli, tc.gpu, tc.unit, diff)
			}
		})
	}
}
