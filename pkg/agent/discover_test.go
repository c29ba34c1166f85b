package agent

import (
	"errors"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

func catalogModel(t *testing.T, name string) allocator.Model {
	t.Helper()
	m, ok := allocator.Default().Model(name)
	if !ok {
		t.Fatalf("no model %q in the catalog", name)
	}
	return m
}

// TestDiscoverReadings checks that a fake GPU answering exactly as the real
// H100 and H200 answered is discovered as the catalog describes them (the
// allocator's tests hold the catalog to the same readings), with names read
// from NVML and with names taken from the catalog.
func TestDiscoverReadings(t *testing.T) {
	tests := map[string]struct {
		file  string
		model string
	}{
		"H100 80GB HBM3": {file: "h100-80gb-hbm3-raw.txt", model: "H100-80GB"},
		"H200":           {file: "h200.txt", model: "H200-141GB"},
	}
	for name, tc := range tests {
		r := readReading(t, tc.file)
		m := catalogModel(t, tc.model)
		want := []GPU{{
			Index: 0, UUID: "GPU-real", Product: r.Name(), Model: m.Name, Known: true,
			MemoryMiB: r.MemoryMiB(), MIGMode: MIGDisabled, Profiles: m.Profiles, Healthy: true,
		}}
		for namer, names := range map[string]ProfileNamer{"NVML names": r.names, "catalog names": nil} {
			t.Run(name+"/"+namer, func(t *testing.T) {
				d := Discoverer{NVML: newFakeNVML(r.device("GPU-real")), Names: names}
				got, err := d.Discover()
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("Discover (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// TestDiscoverReadingsRealSizes pins the real MIG sizes (9984 MiB for an H100
// 1g.10gb, not 10240), read through
// the fakes built from the readings, so no table can stand in for NVML.
func TestDiscoverReadingsRealSizes(t *testing.T) {
	want := map[string]map[string]int64{
		"h100-80gb-hbm3-raw.txt": {"1g.10gb": 9984, "2g.20gb": 20096, "3g.40gb": 40448, "7g.80gb": 81152},
		"h200.txt":               {"1g.18gb": 16384, "3g.71gb": 71424},
	}
	for file, sizes := range want {
		r := readReading(t, file)
		gpus, err := Discoverer{NVML: newFakeNVML(r.device("GPU-x")), Names: r.names}.Discover()
		if err != nil {
			t.Fatal(err)
		}
		for name, mib := range sizes {
			i := slicesIndex(gpus[0].Profiles, name)
			if i < 0 || gpus[0].Profiles[i].MemoryMiB != mib {
				t.Errorf("%s: profile %s not discovered with %d MiB: %+v", file, name, mib, gpus[0].Profiles)
			}
		}
	}
}

func slicesIndex(ps []allocator.Profile, name string) int {
	for i, p := range ps {
		if p.Name == name {
			return i
		}
	}
	return -1
}

// TestDiscoverMock runs discovery on go-nvml's DGX A100 mock. The mock
// differs from real NVML in two ways the test states: its GPUs are named
// "Mock NVIDIA A100-SXM4-40GB", and its profile ids are the profile indices
// (real NVML reports id 19 at index 0, as the readings show).
func TestDiscoverMock(t *testing.T) {
	server := dgxa100.New()
	for _, d := range server.Devices {
		d.(*dgxa100.Device).Config.Name = "NVIDIA A100-SXM4-40GB"
	}
	gpus, err := Discoverer{NVML: server}.Discover()
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != 8 {
		t.Fatalf("discovered %d GPUs, want 8", len(gpus))
	}
	m := catalogModel(t, "A100-40GB")
	for i, g := range gpus {
		want := GPU{
			Index: i, UUID: server.Devices[i].(*dgxa100.Device).UUID, Product: "NVIDIA A100-SXM4-40GB",
			Model: "A100-40GB", Known: true, MemoryMiB: 40960, MIGMode: MIGDisabled, Profiles: m.Profiles, Healthy: true,
		}
		if diff := cmp.Diff(want, g, cmpopts.IgnoreFields(allocator.Profile{}, "ID")); diff != "" {
			t.Errorf("GPU %d (-want +got):\n%s", i, diff)
		}
	}
	if p := gpus[0].Profiles[0]; p.Name != "1g.5gb" || p.ID != nvml.GPU_INSTANCE_PROFILE_1_SLICE {
		t.Errorf("mock's first profile = %s id %d, want 1g.5gb with the index as id", p.Name, p.ID)
	}
}

// TestDiscoverMockMIG creates GPU instances on a mock GPU with MIG on and
// expects them back with their placements, and the GPU left out of shares.
func TestDiscoverMockMIG(t *testing.T) {
	server := dgxa100.New()
	dev := server.Devices[0].(*dgxa100.Device)
	dev.Config.Name = "NVIDIA A100-SXM4-40GB"
	dev.MigMode = nvml.DEVICE_MIG_ENABLE
	for _, c := range []struct{ index, start, size int }{{nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4, 4}, {nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0, 1}} {
		info, _ := dev.GetGpuInstanceProfileInfo(c.index)
		if _, ret := dev.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: uint32(c.start), Size: uint32(c.size)}); ret != nvml.SUCCESS {
			t.Fatal(ret)
		}
	}
	gpus, err := Discoverer{NVML: server}.Discover()
	if err != nil {
		t.Fatal(err)
	}
	want := []Instance{
		{ID: 1, Profile: "1g.5gb", Placement: allocator.Placement{Start: 0, Size: 1}, MemoryMiB: 4864},
		{ID: 0, Profile: "3g.20gb", Placement: allocator.Placement{Start: 4, Size: 4}, MemoryMiB: 19968},
	}
	if diff := cmp.Diff(want, gpus[0].Instances); diff != "" {
		t.Errorf("instances (-want +got):\n%s", diff)
	}
	if gpus[0].MIGMode != MIGEnabled || gpus[0].Shares() || !gpus[1].Shares() {
		t.Errorf("GPU 0 MIG %s shares %v, GPU 1 shares %v; want MIG on GPU 0 only, left out of shares",
			gpus[0].MIGMode, gpus[0].Shares(), gpus[1].Shares())
	}
}

// TestDiscoverUnknownModel keeps a GPU the catalog does not know, named as
// GPU Feature Discovery would name it, its profile names guessed from sizes.
func TestDiscoverUnknownModel(t *testing.T) {
	server := dgxa100.New() // "Mock NVIDIA A100-SXM4-40GB" is in no catalog
	gpus, err := Discoverer{NVML: server}.Discover()
	if err != nil {
		t.Fatal(err)
	}
	g := gpus[0]
	var names []string
	for _, p := range g.Profiles {
		names = append(names, p.Name)
	}
	want := []string{"1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"}
	if g.Known || g.Model != "Mock-NVIDIA-A100-SXM4-40GB" || !cmp.Equal(want, names) {
		t.Errorf("unknown GPU: known %v model %q profiles %v; want unknown, Mock-NVIDIA-A100-SXM4-40GB, %v",
			g.Known, g.Model, names, want)
	}
}

func TestDiscoverWithoutMIG(t *testing.T) {
	d := &mock.Device{
		GetUUIDFunc:       func() (string, nvml.Return) { return "GPU-t4", nvml.SUCCESS },
		GetNameFunc:       func() (string, nvml.Return) { return "Tesla T4", nvml.SUCCESS },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 15360 << 20}, nvml.SUCCESS },
		GetMigModeFunc:    func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED },
	}
	gpus, err := Discoverer{NVML: newFakeNVML(d)}.Discover()
	if err != nil {
		t.Fatal(err)
	}
	want := []GPU{{UUID: "GPU-t4", Product: "Tesla T4", Model: "T4", Known: true, MemoryMiB: 15360, MIGMode: MIGUnsupported, Healthy: true}}
	if diff := cmp.Diff(want, gpus); diff != "" {
		t.Errorf("Discover (-want +got):\n%s", diff)
	}
}

// TestDiscoverMarksAGPUThatDoesNotAnswer: GPU 1 of two fake H100s fails one
// NVML query; it is kept, unhealthy, with what was read and why, and GPU 0
// is discovered in full. Only a failed device count fails discovery.
func TestDiscoverMarksAGPUThatDoesNotAnswer(t *testing.T) {
	r := readReading(t, "h100-80gb-hbm3-raw.txt")
	m := catalogModel(t, "H100-80GB")
	good := GPU{Index: 0, UUID: "GPU-h100-0", Product: r.Name(), Model: m.Name, Known: true,
		MemoryMiB: r.MemoryMiB(), MIGMode: MIGDisabled, Profiles: m.Profiles, Healthy: true}
	failing := func(op string, ret nvml.Return) string { return nvmlError(op, ret).Error() }
	tests := map[string]struct {
		breakGPU1 func(f *fakeNVML, d *device)
		want      GPU
		wantErr   error
	}{
		"memory: the GPU is lost": {
			breakGPU1: func(_ *fakeNVML, d *device) { d.Lost.Store(true) },
			want: GPU{Index: 1, UUID: "GPU-h100-1", Product: r.Name(), Model: m.Name, Known: true,
				Error: failing("memory", nvml.ERROR_GPU_IS_LOST)},
		},
		"UUID: NVML fails": {
			breakGPU1: func(_ *fakeNVML, d *device) {
				d.GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_UNKNOWN }
			},
			want: GPU{Index: 1, Product: r.Name(), Model: m.Name, Known: true, MemoryMiB: r.MemoryMiB(),
				Error: failing("uuid", nvml.ERROR_UNKNOWN)},
		},
		"no handle": {
			breakGPU1: func(f *fakeNVML, _ *device) {
				get := f.DeviceGetHandleByIndexFunc
				f.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
					if i == 1 {
						return nil, nvml.ERROR_GPU_IS_LOST
					}
					return get(i)
				}
			},
			want: GPU{Index: 1, Error: failing("device handle", nvml.ERROR_GPU_IS_LOST)},
		},
		"the device count fails discovery": {
			breakGPU1: func(f *fakeNVML, _ *device) {
				f.DeviceGetCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_DRIVER_NOT_LOADED }
			},
			wantErr: nvml.ERROR_DRIVER_NOT_LOADED,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			devs := h100s(t, 2)
			f := newFakeNVML(nvmlDevices(devs)...)
			tc.breakGPU1(f, devs[1])
			got, err := Discoverer{NVML: f}.Discover()
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Discover error = %v, want one that wraps %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]GPU{good, tc.want}, got); diff != "" {
				t.Errorf("Discover (-want +got):\n%s", diff)
			}
		})
	}
}
