package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuadmit/gpuadmit/bench/packing"
)

func TestParseSeeds(t *testing.T) {
	tests := map[string]struct {
		value   string
		want    []uint64
		wantErr string
	}{
		"a range, both ends in":    {value: "42-51", want: []uint64{42, 43, 44, 45, 46, 47, 48, 49, 50, 51}},
		"a list":                   {value: "42,45", want: []uint64{42, 45}},
		"ranges and seeds mixed":   {value: "1-2, 7", want: []uint64{1, 2, 7}},
		"a range of one":           {value: "5-5", want: []uint64{5}},
		"a word":                   {value: "forty", wantErr: `--seeds "forty": "forty" is not a seed`},
		"a backward range":         {value: "51-42", wantErr: `--seeds "51-42": "51-42" is not a seed`},
		"a negative seed":          {value: "-1", wantErr: `--seeds "-1"`},
		"an empty item":            {value: "42,,43", wantErr: `--seeds "42,,43": empty item`},
		"nothing":                  {value: "", wantErr: `--seeds "": empty item`},
		"a seed in two items":      {value: "42-45,44", wantErr: `--seeds "42-45,44": seed 44 listed twice`},
		"a range too long to mean": {value: "0-18446744073709551615", wantErr: "more than 10000 seeds"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseSeeds(tc.value)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestParsePolicies(t *testing.T) {
	all, err := parsePolicies("all")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(packing.Policies, all); diff != "" {
		t.Errorf("all (-want +got)\n%s", diff)
	}
	named, err := parsePolicies("product,pinned-scarcity,fgd")
	if err != nil {
		t.Fatalf("variants named: %v", err)
	}
	if diff := cmp.Diff([]string{"product", "pinned-scarcity", "fgd"}, named); diff != "" {
		t.Errorf("variants named (-want +got)\n%s", diff)
	}
	if _, err := parsePolicies("fgd,tetris"); err == nil || !strings.Contains(err.Error(), `--policies "fgd,tetris": unknown policy "tetris"`) {
		t.Errorf("err = %v, want an unknown policy named with the flag", err)
	}
	if _, err := parseList("--workloads", "default,default"); err == nil || !strings.Contains(err.Error(), `--workloads "default,default": default listed twice`) {
		t.Errorf("err = %v, want a repeated workload named with the flag", err)
	}
}
