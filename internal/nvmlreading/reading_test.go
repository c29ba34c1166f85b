package nvmlreading

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseProfile(t *testing.T) {
	line := "profile 9 id 15 MIG 1g.20gb slices 1 inst 4 sm 26 ce 1 memMB 20096 rc2 0 [(0, 2), (2, 2), (4, 2), (6, 2)]"
	want := Profile{Index: 9, ID: 15, Name: "1g.20gb", Slices: 1, Instances: 4, SMs: 26, CopyEngines: 1, MemoryMiB: 20096,
		Placements: []Placement{{0, 2}, {2, 2}, {4, 2}, {6, 2}}}
	got, err := ParseProfile(line)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseProfile (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"profile 5 id 9 MIG 3g.40gb slices x [(0, 4)]", "profile 5 id 9 MIG 3g.40gb slices 3 inst 2 sm 60 ce 3 memMB 1 rc2 0 []"} {
		if _, err := ParseProfile(bad); err == nil {
			t.Errorf("ParseProfile(%q) succeeded", bad)
		}
	}
}

func TestReadH100(t *testing.T) {
	r, err := Read(filepath.Join("..", "..", "pkg", "allocator", "testdata", "nvml", "h100-80gb-hbm3-raw.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "NVIDIA H100 80GB HBM3" || r.MemoryMiB != 81559 || len(r.Profiles) != 7 || r.Refused[5] != 3 || r.MIG == nil || r.MIG.Current != 0 {
		t.Errorf("reading = %+v", r)
	}
}
