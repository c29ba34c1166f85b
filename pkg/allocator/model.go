package allocator

import "slices"

// Placement is where a MIG GPU instance may start on a GPU and how many
// memory slices it covers, as NVML's GetGpuInstancePossiblePlacements reports.
type Placement struct {
	Start int `json:"start"`
	Size  int `json:"size"`
}

// Profile is one MIG GPU-instance profile of a GPU model, with the sizes NVML
// reports on real hardware (not the number in the name).
type Profile struct {
	// Name is the profile as nvidia-smi and the device plugin name it: "1g.10gb", "1g.10gb+me".
	Name string `json:"name"`
	// ID is NVML's GPU instance profile id (19 for 1g.*, 0 for 7g.*).
	ID int `json:"id"`
	// ComputeSlices is the "g" in the name: GPU (compute) slices.
	ComputeSlices int `json:"computeSlices"`
	// MemorySlices is the number of memory slices the instance occupies (the placement size).
	MemorySlices int `json:"memorySlices"`
	// MemoryMiB is the instance's memory as NVML reports it.
	MemoryMiB int64 `json:"memoryMiB"`
	// SMs is the number of streaming multiprocessors.
	SMs int `json:"sms"`
	// MaxInstances is how many of these fit on one GPU.
	MaxInstances int `json:"maxInstances"`
	// Placements lists the possible placements.
	Placements []Placement `json:"placements"`
}

// Model is a GPU model: its total memory and, for MIG-capable GPUs, its profiles.
type Model struct {
	// Name is the catalog's short name, e.g. "H100-80GB"; valid in a label value.
	Name string `json:"name"`
	// Products are the product names GPU Feature Discovery and NVML report for it
	// ("NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3").
	Products []string `json:"products"`
	// MemoryMiB is the GPU's total memory as NVML reports it.
	MemoryMiB int64 `json:"memoryMiB"`
	// SMs is the whole GPU's SM count.
	SMs int `json:"sms"`
	// MemorySlices is the number of MIG memory slices (8 on A100/H100/H200, 4 on A30); 0 without MIG.
	MemorySlices int `json:"memorySlices"`
	// ComputeSlices is the number of MIG compute slices (7, or 4 on A30); 0 without MIG.
	ComputeSlices int `json:"computeSlices"`
	// Profiles are the MIG profiles, smallest first; empty without MIG.
	Profiles []Profile `json:"profiles"`
}

// Profile returns the model's MIG profile called name, accepting the
// Kubernetes resource spelling "1g.10gb.me" for "1g.10gb+me" and any case.
func (m Model) Profile(name string) (Profile, bool) {
	want := NormalizeProfile(name)
	for _, p := range m.Profiles {
		if NormalizeProfile(p.Name) == want {
			return p.clone(), true
		}
	}
	return Profile{}, false
}

// MIG reports whether the model can be partitioned with MIG.
func (m Model) MIG() bool {
	return len(m.Profiles) > 0
}

// clone returns a copy of m that shares no slice with it, so a catalog can
// hand models out without letting callers change its own.
func (m Model) clone() Model {
	m.Products = slices.Clone(m.Products)
	m.Profiles = slices.Clone(m.Profiles)
	for i := range m.Profiles {
		m.Profiles[i] = m.Profiles[i].clone()
	}
	return m
}

// clone returns a copy of p that shares no slice with it.
func (p Profile) clone() Profile {
	p.Placements = slices.Clone(p.Placements)
	return p
}
