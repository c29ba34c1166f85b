package dra

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// policy is a device's memory capacity in readable form.
type policy struct {
	Value, Default, Min, Step string
	Shared                    bool
}

func policyOf(d resourceapi.Device) policy {
	c := d.Capacity[CapacityMemory]
	p := policy{Value: c.Value.String(), Shared: d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations}
	if rp := c.RequestPolicy; rp != nil {
		p.Default, p.Min, p.Step = rp.Default.String(), rp.ValidRange.Min.String(), rp.ValidRange.Step.String()
	}
	return p
}

func TestSharePolicy(t *testing.T) {
	tests := map[string]struct {
		gpu  string
		unit int64
		want policy
	}{
		// 81559 MiB = 79 GiB + 663 MiB: a claim without a request takes
		// 79 GiB and the 663 MiB left fit no 1 GiB share.
		"H100 in GiB steps: default every whole GiB":   {gpu: "H100-80GB", want: policy{Value: "81559Mi", Default: "79Gi", Min: "1Gi", Step: "1Gi", Shared: true}},
		"A100 40GB is whole GiB: default is all of it": {gpu: "A100-40GB", want: policy{Value: "40Gi", Default: "40Gi", Min: "1Gi", Step: "1Gi", Shared: true}},
		"T4 in 4 GiB steps":                            {gpu: "T4", unit: 4096, want: policy{Value: "15Gi", Default: "12Gi", Min: "4Gi", Step: "4Gi", Shared: true}},
		"a unit over half the GPU: not shared":         {gpu: "T4", unit: 8192, want: policy{Value: "15Gi"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			devs := Devices([]allocator.NodeGPU{wholeGPU(model(t, tc.gpu), 0)}, DeviceOptions{ShareUnitMiB: tc.unit})
			if len(devs) != 1 {
				t.Fatalf("got %d devices, want 1", len(devs))
			}
			if diff := cmp.Diff(tc.want, policyOf(devs[0])); diff != "" {
				t.Errorf("memory capacity (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeviceAttributes(t *testing.T) {
	h100 := model(t, "H100-80GB")
	g := migGPU(h100, 3, "1g.10gb+me")
	devs := Devices([]allocator.NodeGPU{wholeGPU(h100, 0), g}, DeviceOptions{MIGUUIDs: migUUIDs(g)})
	got := map[string]map[resourceapi.QualifiedName]string{}
	for _, d := range devs {
		got[d.Name] = map[resourceapi.QualifiedName]string{}
		for k, v := range d.Attributes {
			switch {
			case v.StringValue != nil:
				got[d.Name][k] = *v.StringValue
			case v.IntValue != nil:
				got[d.Name][k] = resource.NewQuantity(*v.IntValue, resource.DecimalSI).String()
			}
		}
	}
	want := map[string]map[resourceapi.QualifiedName]string{
		"gpu-0": {AttrType: TypeGPU, AttrUUID: wholeGPU(h100, 0).UUID, AttrProduct: "NVIDIA H100 80GB HBM3", AttrModel: "H100-80GB", AttrIndex: "0"},
		"gpu-3-mig-1g-10gb-me-1": {
			AttrType: TypeMIG, AttrUUID: migUUID(g, 1), AttrParentUUID: g.UUID, AttrProfile: "1g.10gb+me",
			AttrProduct: "NVIDIA H100 80GB HBM3", AttrModel: "H100-80GB", AttrIndex: "3",
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("attributes (-want +got):\n%s", diff)
	}
	if p := policyOf(devs[0]); p.Shared || p.Value != "9984Mi" {
		t.Errorf("MIG device capacity %+v, want 9984Mi and not shared", p)
	}
}

func TestDeviceOrder(t *testing.T) {
	h100, a100 := model(t, "H100-80GB"), model(t, "A100-40GB")
	broken := wholeGPU(a100, 4)
	broken.Healthy = false
	brokenMIG := migGPU(h100, 5, "7g.80gb")
	brokenMIG.Healthy = false
	tests := map[string]struct {
		gpus []allocator.NodeGPU
		want []string
	}{
		"same GPUs: index order, so a first fit fills GPU 0 first": {
			gpus: []allocator.NodeGPU{wholeGPU(h100, 1), wholeGPU(h100, 0)},
			want: []string{"gpu-0", "gpu-1"},
		},
		"smaller memory first: shares fill the small GPU, whole big GPUs stay free": {
			gpus: []allocator.NodeGPU{wholeGPU(h100, 0), wholeGPU(a100, 1)},
			want: []string{"gpu-1", "gpu-0"},
		},
		"MIG instances by size, then GPU, then placement": {
			gpus: []allocator.NodeGPU{
				migGPU(h100, 0, "3g.40gb", "1g.10gb", "1g.10gb"),
				migGPU(h100, 1, "1g.10gb", "4g.40gb"),
				wholeGPU(a100, 2),
			},
			want: []string{
				"gpu-0-mig-1g-10gb-2", "gpu-0-mig-1g-10gb-3", "gpu-1-mig-1g-10gb-1",
				"gpu-0-mig-3g-40gb-1", "gpu-1-mig-4g-40gb-2", "gpu-2",
			},
		},
		"unhealthy GPUs and their MIG instances are published (tainted), in order": {
			gpus: []allocator.NodeGPU{broken, brokenMIG, wholeGPU(a100, 0)},
			want: []string{"gpu-0", "gpu-4", "gpu-5-mig-7g-80gb-1"},
		},
		"MIG on without instances: nothing": {
			gpus: []allocator.NodeGPU{migGPU(h100, 0)},
			want: nil,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, d := range Devices(tc.gpus, DeviceOptions{}) {
				got = append(got, d.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("device order (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMIGDeviceNamesAreDNSLabels(t *testing.T) {
	for _, m := range allocator.Default().Models() {
		for _, p := range m.Profiles {
			name := MIGDeviceName(7, p.Name, 14)
			if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
				t.Errorf("%s %s: device name %q: %v", m.Name, p.Name, name, errs)
			}
		}
	}
}

func TestResourcesCutsSlicesInOrder(t *testing.T) {
	devs := make([]resourceapi.Device, 300)
	for i := range devs {
		devs[i].Name = GPUDeviceName(i)
	}
	pool := Resources("node-a", devs).Pools["node-a"]
	var sizes []int
	var names []string
	for _, s := range pool.Slices {
		sizes = append(sizes, len(s.Devices))
		names = append(names, s.Devices[0].Name)
	}
	if diff := cmp.Diff([]int{128, 128, 44}, sizes); diff != "" {
		t.Errorf("slice sizes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"gpu-0", "gpu-128", "gpu-256"}, names); diff != "" {
		t.Errorf("first device of each slice (-want +got):\n%s", diff)
	}
	if empty := Resources("node-b", nil).Pools["node-b"]; len(empty.Slices) != 1 || len(empty.Slices[0].Devices) != 0 {
		t.Errorf("a node without devices publishes %d slices, want one empty slice", len(empty.Slices))
	}
}
