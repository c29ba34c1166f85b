package inventory_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

func draGPU(name, model string, mib int64) resourceapi.Device {
	return resourceapi.Device{Name: name,
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"type": {StringValue: ptr.To("gpu")}, "model": {StringValue: ptr.To(model)}},
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: *resource.NewQuantity(mib<<20, resource.BinarySI)}},
	}
}

func draMIG(name, profile string, mib int64) resourceapi.Device {
	d := draGPU(name, "H100-80GB", mib)
	d.Attributes["type"] = resourceapi.DeviceAttribute{StringValue: ptr.To("mig")}
	d.Attributes["profile"] = resourceapi.DeviceAttribute{StringValue: ptr.To(profile)}
	return d
}

func slice(node, driver string, gen int64, devs ...resourceapi.Device) resourceapi.ResourceSlice {
	var s resourceapi.ResourceSlice
	s.Name = node + "-" + driver
	s.Spec = resourceapi.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node),
		Pool: resourceapi.ResourcePool{Name: node, Generation: gen, ResourceSliceCount: 1}, Devices: devs}
	return s
}

func draNode(name string, alloc map[string]string) corev1.Node {
	n := node(name, map[string]string{inventory.LabelProduct: h100, allocator.LabelNodeMode: allocator.NodeModeDRA}, alloc)
	return n
}

func TestDRANodesAreReadFromTheirSlices(t *testing.T) {
	drv := allocator.DRADriver
	tests := map[string]struct {
		nodes   []corev1.Node
		slices  []resourceapi.ResourceSlice
		want    map[string]poolView
		refused []string
	}{
		"GPUs without MIG serve nvidia.com/gpu through the driver": {
			nodes:  []corev1.Node{draNode("d-0", nil)},
			slices: []resourceapi.ResourceSlice{slice("d-0", drv, 1, draGPU("gpu-0", "H100-80GB", 81559), draGPU("gpu-1", "H100-80GB", 81559))},
			want: map[string]poolView{"h100-80gb-whole-dra": {
				Model: "H100-80GB", Mode: inventory.Whole, Resource: "nvidia.com/gpu", GPUMemoryMiB: 81559,
				NodeSelector: map[string]string{inventory.LabelProduct: h100, allocator.LabelNodeMode: allocator.NodeModeDRA},
				Allocatable:  map[string]int64{"nvidia.com/gpu": 2}, Nodes: []string{"d-0"},
			}},
		},
		"MIG instances serve nvidia.com/mig-<profile> through the driver": {
			nodes:  []corev1.Node{draNode("d-0", nil)},
			slices: []resourceapi.ResourceSlice{slice("d-0", drv, 1, draMIG("gpu-0-mig-3g-40gb-1", "3g.40gb", 40448), draMIG("gpu-0-mig-3g-40gb-2", "3g.40gb", 40448))},
			want: map[string]poolView{"h100-80gb-mig-mixed-dra": {
				Model: "H100-80GB", Mode: inventory.MIGMixed, GPUMemoryMiB: 81559, Profiles: []string{"3g.40gb 40448 nvidia.com/mig-3g.40gb"},
				NodeSelector: map[string]string{inventory.LabelProduct: h100, allocator.LabelNodeMode: allocator.NodeModeDRA},
				Allocatable:  map[string]int64{"nvidia.com/mig-3g.40gb": 2}, Nodes: []string{"d-0"},
			}},
		},
		"an older generation of the pool and other drivers do not count": {
			nodes: []corev1.Node{draNode("d-0", nil)},
			slices: []resourceapi.ResourceSlice{
				slice("d-0", drv, 2, draGPU("gpu-0", "H100-80GB", 81559)),
				func() resourceapi.ResourceSlice {
					s := slice("d-0", drv, 1, draGPU("gpu-1", "H100-80GB", 81559))
					s.Name += "-old"
					return s
				}(),
				slice("d-0", "gpu.nvidia.com", 1, draGPU("gpu-7", "H100-80GB", 81559)),
			},
			want: map[string]poolView{"h100-80gb-whole-dra": {
				Model: "H100-80GB", Mode: inventory.Whole, Resource: "nvidia.com/gpu", GPUMemoryMiB: 81559,
				NodeSelector: map[string]string{inventory.LabelProduct: h100, allocator.LabelNodeMode: allocator.NodeModeDRA},
				Allocatable:  map[string]int64{"nvidia.com/gpu": 1}, Nodes: []string{"d-0"},
			}},
		},
		"a device plugin advertising nvidia.com/gpu on a DRA node is refused": {
			nodes:   []corev1.Node{draNode("d-0", map[string]string{"nvidia.com/gpu": "2"})},
			slices:  []resourceapi.ResourceSlice{slice("d-0", drv, 1, draGPU("gpu-0", "H100-80GB", 81559))},
			want:    map[string]poolView{},
			refused: []string{"d-0"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			inv := inventory.BuildWithSlices(tc.nodes, tc.slices, nil)
			if diff := cmp.Diff(tc.want, view(inv)); diff != "" {
				t.Errorf("pools (-want +got):\n%s", diff)
			}
			var refused []string
			for _, r := range inv.Refused {
				refused = append(refused, r.Node)
			}
			if diff := cmp.Diff(tc.refused, refused); diff != "" {
				t.Errorf("refused (-want +got):\n%s", diff)
			}
			for _, p := range inv.Pools {
				if !p.DRA {
					t.Errorf("pool %s is not marked DRA", p.Name)
				}
			}
		})
	}
}

// Where a newer DeviceClass of another driver carries nvidia.com/gpu, the
// scheduler gives that name to it on every node: gpuadmit's DRA pool no
// longer counts nvidia.com/gpu, and the inventory says why.
func TestDRAPoolLosesANameAnotherClassTook(t *testing.T) {
	nodes := []corev1.Node{draNode("d-0", nil)}
	slices := []resourceapi.ResourceSlice{slice("d-0", allocator.DRADriver, 1, draGPU("gpu-0", "H100-80GB", 81559))}
	classFor := func(r string) string {
		if r == "nvidia.com/gpu" {
			return "gpu.nvidia.com"
		}
		return "gpu.gpuadmit.io"
	}
	inv := inventory.BuildDRA(nodes, inventory.DRA{Slices: slices, ClassFor: classFor}, nil)
	for _, p := range inv.Pools {
		if p.Allocatable["nvidia.com/gpu"] > 0 {
			t.Errorf("pool %s counts nvidia.com/gpu, which DeviceClass gpu.nvidia.com serves", p.Name)
		}
	}
	checkWarnings(t, inv.Warnings, []string{`serves nvidia.com/gpu from DeviceClass "gpu.nvidia.com", not gpuadmit's`})
}
