package intent

import "testing"

func TestRequestString(t *testing.T) {
	tests := map[string]struct {
		req  Request
		want string
	}{
		"one whole GPU":       {Request{Form: Whole, Count: 1}, "1 whole GPU"},
		"two whole GPUs":      {Request{Form: Whole, Count: 2}, "2 whole GPUs"},
		"one replica":         {Request{Dialect: NVIDIAShared, Form: Whole, Count: 1}, "1 time-sliced replica"},
		"three replicas":      {Request{Dialect: NVIDIAShared, Form: Whole, Count: 3}, "3 time-sliced replicas"},
		"memory on one GPU":   {Request{Form: Memory, Count: 1, MemoryMiB: 3000}, "1 GPU with 3000 MiB"},
		"memory on two GPUs":  {Request{Form: Memory, Count: 2, MemoryMiB: 3000}, "2 GPUs with 3000 MiB each"},
		"half a GPU":          {Request{Form: Fraction, Count: 1, FractionMilli: 500}, "half a GPU"},
		"a quarter":           {Request{Form: Fraction, Count: 1, FractionMilli: 250}, "0.25 of a GPU"},
		"a share of two GPUs": {Request{Form: Fraction, Count: 2, FractionMilli: 125}, "0.125 of each of 2 GPUs"},
		"all of a GPU":        {Request{Form: Fraction, Count: 1, FractionMilli: 1000}, "all of a GPU"},
		"one MIG slice":       {Request{Form: Profile, Count: 1, Profile: "1g.10gb"}, "1 MIG 1g.10gb slice"},
		"two MIG slices":      {Request{Form: Profile, Count: 2, Profile: "3g.40gb"}, "2 MIG 3g.40gb slices"},
		"memory and cores":    {Request{Form: Memory, Count: 1, MemoryMiB: 3000, CoresPercent: 30}, "1 GPU with 3000 MiB, 30% of compute"},
		"the zero request":    {Request{}, "no GPU"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.req.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}
