package fakegpu_test

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuadmit/gpuadmit/internal/fakegpu"
	"github.com/gpuadmit/gpuadmit/pkg/agent"
	"github.com/gpuadmit/gpuadmit/pkg/agent/dra"
	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// A GPU configured in MIG mode is discovered by the agent with its GPU
// instances at the placements NVML's reading allows (the second 3g.40gb
// after the first), with the MIG
// device UUIDs the DRA driver reads; a GPU instance listed gone in the
// control file is neither discovered nor read any more.
func TestMIGInstancesAndOneGone(t *testing.T) {
	readings, err := filepath.Abs("../../pkg/allocator/testdata/nvml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	control := filepath.Join(dir, "control.json")
	n, err := fakegpu.New(fakegpu.Config{
		Readings: readings, Control: control,
		GPUs: []fakegpu.GPUConfig{{Reading: "h100-80gb-hbm3-raw.txt", MIG: []string{"3g.40gb", "3g.40gb"}}},
	}, dir)
	if err != nil {
		t.Fatal(err)
	}
	d := agent.Discoverer{NVML: n, Names: fakegpu.ProfileName}
	instances := func() []allocator.MIGInstance {
		t.Helper()
		gpus, err := d.Discover()
		if err != nil {
			t.Fatal(err)
		}
		if len(gpus) != 1 || gpus[0].MIGMode != agent.MIGEnabled {
			t.Fatalf("discovered %+v, want one GPU in MIG mode", gpus)
		}
		return gpus[0].Instances
	}
	uuid := fakegpu.UUID(0)
	want := []allocator.MIGInstance{
		{ID: 1, Profile: "3g.40gb", MemoryMiB: 40448, Placement: allocator.Placement{Start: 0, Size: 4}},
		{ID: 2, Profile: "3g.40gb", MemoryMiB: 40448, Placement: allocator.Placement{Start: 4, Size: 4}},
	}
	if diff := cmp.Diff(want, instances()); diff != "" {
		t.Errorf("instances (-want +got):\n%s", diff)
	}
	wantUUIDs := map[dra.InstanceKey]string{{GPU: uuid, GI: 1}: fakegpu.MIGUUID(0, 1), {GPU: uuid, GI: 2}: fakegpu.MIGUUID(0, 2)}
	if got, err := dra.ReadMIGUUIDs(n); err != nil || !cmp.Equal(wantUUIDs, got) {
		t.Errorf("MIG UUIDs = %v, %v; want %v", got, err, wantUUIDs)
	}

	if err := fakegpu.WriteControl(control, fakegpu.Control{GoneInstances: map[string][]uint32{uuid: {1}}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want[1:], instances()); diff != "" {
		t.Errorf("instances after GPU instance 1 went (-want +got):\n%s", diff)
	}
	wantUUIDs = map[dra.InstanceKey]string{{GPU: uuid, GI: 2}: fakegpu.MIGUUID(0, 2)}
	if got, err := dra.ReadMIGUUIDs(n); err != nil || !cmp.Equal(wantUUIDs, got) {
		t.Errorf("MIG UUIDs after GPU instance 1 went = %v, %v; want %v", got, err, wantUUIDs)
	}
}

// A MIG profile the GPU lacks, or one that no longer fits, is refused
// naming the GPU's configuration.
func TestMIGConfigRefused(t *testing.T) {
	readings, err := filepath.Abs("../../pkg/allocator/testdata/nvml")
	if err != nil {
		t.Fatal(err)
	}
	for name, mig := range map[string][]string{
		"unknown profile": {"9g.99gb"},
		"does not fit":    {"7g.80gb", "1g.10gb"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := fakegpu.New(fakegpu.Config{Readings: readings, GPUs: []fakegpu.GPUConfig{{Reading: "h100-80gb-hbm3-raw.txt", MIG: mig}}}, t.TempDir())
			if err == nil {
				t.Fatalf("MIG %v accepted", mig)
			}
			t.Log(err)
		})
	}
}
