package fakegpu_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
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

// A MIG device answers what nvcdi asks of it before it makes its CDI
// edits: go-nvlib finds it by its UUID and reads its profile (the GPU
// instance's, through its one compute instance) as NVML names it, and the
// placement nvcdi names its capabilities by (the parent's minor, the GPU
// and compute instance IDs). A deleted instance's MIG device is not found.
func TestMIGDeviceAnswersNVCDI(t *testing.T) {
	readings, err := filepath.Abs("../../pkg/allocator/testdata/nvml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	control := filepath.Join(dir, "control.json")
	n, err := fakegpu.New(fakegpu.Config{
		Readings: readings, Control: control,
		GPUs: []fakegpu.GPUConfig{{Reading: "h100-80gb-hbm3-raw.txt"}, {Reading: "h100-80gb-hbm3-raw.txt", MIG: []string{"1g.10gb", "3g.40gb", "2g.20gb"}}},
	}, dir)
	if err != nil {
		t.Fatal(err)
	}
	lib := device.New(n)
	for gi, want := range map[uint32]string{1: "1g.10gb", 2: "3g.40gb", 3: "2g.20gb"} {
		mig, err := lib.NewMigDeviceByUUID(fakegpu.MIGUUID(1, gi))
		if err != nil {
			t.Fatalf("MIG device of GPU instance %d: %v", gi, err)
		}
		p, err := mig.GetProfile()
		if err != nil {
			t.Fatalf("profile of GPU instance %d: %v", gi, err)
		}
		if p.String() != want {
			t.Errorf("profile of GPU instance %d = %s, want %s", gi, p, want)
		}
		parent, ret := mig.GetDeviceHandleFromMigDeviceHandle()
		minor, ret2 := parent.GetMinorNumber()
		gotGI, ret3 := mig.GetGpuInstanceId()
		ci, ret4 := mig.GetComputeInstanceId()
		if ret != nvml.SUCCESS || ret2 != nvml.SUCCESS || ret3 != nvml.SUCCESS || ret4 != nvml.SUCCESS || minor != 1 || gotGI != int(gi) || ci != 0 {
			t.Errorf("GPU instance %d: parent minor %d (%v), GI %d (%v), CI %d (%v, %v); want 1, %d, 0", gi, minor, ret2, gotGI, ret3, ci, ret4, ret, gi)
		}
	}
	if err := fakegpu.WriteControl(control, fakegpu.Control{GoneInstances: map[string][]uint32{fakegpu.UUID(1): {2}}}); err != nil {
		t.Fatal(err)
	}
	if _, ret := n.DeviceGetCount(); ret != nvml.SUCCESS { // applies the control file, as discovery does
		t.Fatal(ret)
	}
	if _, err := lib.NewMigDeviceByUUID(fakegpu.MIGUUID(1, 2)); err == nil {
		t.Error("the MIG device of deleted GPU instance 2 is still found by its UUID")
	}
	if _, err := lib.NewMigDeviceByUUID(fakegpu.MIGUUID(1, 3)); err != nil {
		t.Errorf("GPU instance 3 after instance 2 was deleted: %v", err)
	}
}

// The MIG minors file lists every capability nvcdi looks up for a MIG
// device, and the minor CICapMinor and GICapMinor give it.
func TestMIGMinorsListTheCapabilities(t *testing.T) {
	lines := strings.Split(string(fakegpu.MIGMinors(2)), "\n")
	for _, want := range []string{
		"config 1", "monitor 2", "gpu0/gi0/access 3", "gpu0/gi0/ci0/access 4",
		fmt.Sprintf("gpu1/gi2/access %d", fakegpu.GICapMinor(1, 2)),
		fmt.Sprintf("gpu1/gi2/ci0/access %d", fakegpu.CICapMinor(1, 2, 0)),
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("mig-minors lacks %q", want)
		}
	}
	seen := map[string]string{}
	for _, l := range lines[:len(lines)-1] {
		capName, minor, ok := strings.Cut(l, " ")
		if !ok {
			t.Fatalf("line %q is not \"<capability> <minor>\"", l)
		}
		if other, dup := seen[minor]; dup {
			t.Errorf("minor %s is both %s and %s", minor, other, capName)
		}
		seen[minor] = capName
	}
}
