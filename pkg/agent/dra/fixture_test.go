package dra

import (
	"fmt"
	"testing"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// model returns a catalog model by name.
func model(t testing.TB, name string) allocator.Model {
	t.Helper()
	m, ok := allocator.Default().Model(name)
	if !ok {
		t.Fatalf("no catalog model %s", name)
	}
	return m
}

// wholeGPU is GPU i of model m with MIG off, as discovery reports it.
func wholeGPU(m allocator.Model, i int) allocator.NodeGPU {
	mode := allocator.MIGUnsupported
	if len(m.Profiles) > 0 {
		mode = allocator.MIGDisabled
	}
	return allocator.NodeGPU{
		Index: i, UUID: fmt.Sprintf("GPU-%08d-0000-0000-0000-000000000000", i), Product: m.Products[len(m.Products)-1],
		Model: m.Name, Known: true, MemoryMiB: m.MemoryMiB, MIGMode: mode, Profiles: m.Profiles, Healthy: true,
	}
}

// migGPU is GPU i of model m with MIG on and one instance per profile
// given, at that profile's placements in turn; GI ids count from 1.
func migGPU(m allocator.Model, i int, profiles ...string) allocator.NodeGPU {
	g := wholeGPU(m, i)
	g.MIGMode = allocator.MIGEnabled
	used := map[string]int{}
	for n, name := range profiles {
		p, _ := m.Profile(name)
		pl := p.Placements[used[name]%len(p.Placements)]
		used[name]++
		g.Instances = append(g.Instances, allocator.MIGInstance{ID: n + 1, Profile: p.Name, Placement: pl, MemoryMiB: p.MemoryMiB})
	}
	return g
}

// migUUID is the fake MIG device UUID of an instance.
func migUUID(g allocator.NodeGPU, gi int) string {
	return fmt.Sprintf("MIG-%08d-%04d-0000-0000-000000000000", g.Index, gi)
}

// migUUIDs names every instance of gpus.
func migUUIDs(gpus ...allocator.NodeGPU) map[InstanceKey]string {
	out := map[InstanceKey]string{}
	for _, g := range gpus {
		for _, in := range g.Instances {
			out[InstanceKey{GPU: g.UUID, GI: in.ID}] = migUUID(g, in.ID)
		}
	}
	return out
}
