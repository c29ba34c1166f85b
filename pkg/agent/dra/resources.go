package dra

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

// Resources is what the driver publishes for a node: one pool named after
// the node, its devices in order, cut into slices of at most 128 devices
// (the API's limit). Slice order is device order: the ResourceSlice
// controller prefixes each slice's name with its index and the scheduler
// reads slices by name. An empty pool still gets one (empty) slice, which
// tells the scheduler that the driver runs and has nothing to offer.
func Resources(node string, devs []resourceapi.Device) resourceslice.DriverResources {
	pool := resourceslice.Pool{Slices: []resourceslice.Slice{{}}}
	if len(devs) > 0 {
		pool.Slices = nil
	}
	for len(devs) > 0 {
		n := min(len(devs), resourceapi.ResourceSliceMaxDevices)
		pool.Slices = append(pool.Slices, resourceslice.Slice{Devices: devs[:n]})
		devs = devs[n:]
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{node: pool}}
}

// Slices are the ResourceSlices the ResourceSlice controller writes for
// res on node, for those who write them in its place (the scale benchmark,
// the scheduler's scheduler_perf workload): generation 1, named by index
// after the node and the driver, without the owner reference to the Node
// the controller adds.
func Slices(node string, res resourceslice.DriverResources) []resourceapi.ResourceSlice {
	var out []resourceapi.ResourceSlice
	for pool, p := range res.Pools {
		for i, s := range p.Slices {
			rs := resourceapi.ResourceSlice{}
			rs.Name = fmt.Sprintf("%s-%s-%d", node, DriverName, i)
			rs.Spec.Driver = DriverName
			rs.Spec.NodeName = &node
			rs.Spec.Pool = resourceapi.ResourcePool{Name: pool, Generation: 1, ResourceSliceCount: int64(len(p.Slices))}
			rs.Spec.Devices = s.Devices
			out = append(out, rs)
		}
	}
	return out
}
