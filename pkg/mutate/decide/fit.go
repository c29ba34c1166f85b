package decide

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/intent"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// Assignment is what one GPU container gets on the chosen pool.
type Assignment struct {
	Req  intent.Request
	Cand policy.Candidate
	// Resource and Quantity are written to the container's requests and limits.
	Resource string
	Quantity int64
	// GivenMiB is the real GPU memory the container receives, all GPUs together.
	GivenMiB int64
	// Profile is the MIG profile given, also where the resource (mig-single's nvidia.com/gpu) does not name it.
	Profile string
	// Why says how the size was found, for the explanation.
	Why string
	// ClaimMiB is set for a share on a DRA pool: the container's GPU comes
	// from a resource claim of that much memory, not from Resource.
	ClaimMiB int64
}

// Resources are what the container requests on pool: the GPU resource and
// the accounting resources with the real MiB given, for ResourceQuota.
// Accounting is never left out: a pod without it would escape every MiB
// quota, so nodes that do not advertise it take no GPU pod (choose.go).
func (a Assignment) Resources(pool *inventory.Pool) corev1.ResourceList {
	out := map[string]int64{inventory.ResourceMemoryMiB: a.GivenMiB, pool.ModelResource: a.GivenMiB}
	if a.Resource != "" {
		out[a.Resource] = a.Quantity
	}
	return resourceList(out)
}

// fit sizes one request for one candidate, or says why the candidate cannot serve it.
func fit(r intent.Request, c policy.Candidate, pool *inventory.Pool) (Assignment, error) {
	tag := fmt.Sprintf("container %q, %s candidate", r.Container, c.Backend)
	if c.Rule != "" {
		tag += " (rule " + c.Rule + ")"
	}
	if !servesBackend(pool, c.Backend) {
		return Assignment{}, fmt.Errorf("%s: the pool is %s", tag, poolKind(pool))
	}
	var a Assignment
	var err error
	switch c.Backend {
	case policy.BackendMIG:
		a, err = fitMIG(r, c, pool)
	case policy.BackendShared:
		a, err = fitShare(r, pool)
	case policy.BackendTimeSliced:
		a, err = fitReplicas(r, pool)
	default:
		a, err = fitWhole(r, pool)
	}
	if err != nil {
		return Assignment{}, fmt.Errorf("%s: %w", tag, err)
	}
	a.Req, a.Cand = r, c
	return a, nil
}

func servesBackend(pool *inventory.Pool, backend string) bool {
	switch m := pool.Mode; backend {
	case policy.BackendMIG:
		return m == inventory.MIGMixed || m == inventory.MIGSingle
	case policy.BackendShared:
		return pool.ServesShares()
	case policy.BackendTimeSliced:
		return m == inventory.TimeSliced
	default:
		return m == inventory.Whole
	}
}

func poolKind(pool *inventory.Pool) string {
	if pool.DRA {
		return string(pool.Mode) + " (DRA)"
	}
	return string(pool.Mode)
}

func fitMIG(r intent.Request, c policy.Candidate, pool *inventory.Pool) (Assignment, error) {
	pr, why, err := migProfile(r, c, pool)
	if err != nil {
		return Assignment{}, err
	}
	if !covers(r, pr.Profile, pool) {
		return Assignment{}, fmt.Errorf("profile %s (%d MiB) does not cover %s", pr.Name, pr.MemoryMiB, r)
	}
	return Assignment{Resource: pr.Resource, Quantity: r.Count, GivenMiB: pr.MemoryMiB * r.Count, Profile: pr.Name, Why: why}, nil
}

// migProfile picks the slice: the policy's, the one asked for, or the smallest that fits.
func migProfile(r intent.Request, c policy.Candidate, pool *inventory.Pool) (inventory.Profile, string, error) {
	name, why := c.Profile, "the profile the policy names"
	switch {
	case name != "":
	case r.Form == intent.Profile:
		name, why = r.Profile, "as asked"
	case r.Form == intent.Whole:
		name, why = fullProfile(pool), "the whole-GPU profile"
	default:
		p, err := smallest(r, pool)
		if err != nil {
			return inventory.Profile{}, "", err
		}
		name, why = p.Name, smallestWhy(r, pool)
	}
	pr, ok := pool.Profile(name)
	if !ok {
		return inventory.Profile{}, "", fmt.Errorf("the pool serves no MIG profile %q (it serves %s)", name, profileNames(pool))
	}
	return pr, why, nil
}

func smallest(r intent.Request, pool *inventory.Pool) (allocator.Profile, error) {
	if r.Form == intent.Fraction {
		return allocator.FitFraction(pool.AllocatorProfiles(), pool.MemorySlices, r.FractionMilli)
	}
	return allocator.FitMemory(pool.AllocatorProfiles(), r.MemoryMiB)
}

func smallestWhy(r intent.Request, pool *inventory.Pool) string {
	if r.Form == intent.Fraction {
		return fmt.Sprintf("the smallest %s slice holding %d/1000 of its %d memory slices", pool.Model, r.FractionMilli, pool.MemorySlices)
	}
	return fmt.Sprintf("the smallest %s slice whose real memory covers %d MiB", pool.Model, r.MemoryMiB)
}

// fullProfile is the profile that spans all memory slices (7g.80gb on an H100).
func fullProfile(pool *inventory.Pool) string {
	for _, p := range pool.Profiles {
		if pool.MemorySlices > 0 && p.MemorySlices == pool.MemorySlices {
			return p.Name
		}
	}
	return ""
}

func covers(r intent.Request, p allocator.Profile, pool *inventory.Pool) bool {
	switch r.Form {
	case intent.Memory:
		return p.MemoryMiB >= r.MemoryMiB
	case intent.Fraction:
		return int64(p.MemorySlices)*1000 >= r.FractionMilli*int64(pool.MemorySlices)
	case intent.Profile:
		return allocator.NormalizeProfile(r.Profile) == p.Name
	default:
		return true
	}
}

func profileNames(pool *inventory.Pool) string {
	if len(pool.Profiles) == 0 {
		return "none"
	}
	s := ""
	for i, p := range pool.Profiles {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s (%d MiB)", p.Name, p.MemoryMiB)
	}
	return s
}

func fitShare(r intent.Request, pool *inventory.Pool) (Assignment, error) {
	if r.Count != 1 {
		return Assignment{}, fmt.Errorf("a memory share lives on one GPU; %s spans %d GPUs", r, r.Count)
	}
	if pool.SharesPerGPU > 0 {
		return fitOneShare(r, pool)
	}
	if pool.DRA {
		return fitClaim(r, pool)
	}
	perGPU := pool.UnitsPerGPU()
	if perGPU == 0 {
		return Assignment{}, fmt.Errorf("the pool's GPU memory is unknown")
	}
	var units int64
	var why string
	switch r.Form {
	case intent.Memory:
		units = allocator.ShareUnits(r.MemoryMiB, pool.ShareUnitMiB)
		why = fmt.Sprintf("%d MiB rounded up to whole %d MiB units", r.MemoryMiB, pool.ShareUnitMiB)
	case intent.Fraction:
		units = allocator.FractionShareUnits(r.FractionMilli, pool.GPUMemoryMiB, pool.ShareUnitMiB)
		why = fmt.Sprintf("%d/1000 of the GPU's %d MiB, rounded up to whole %d MiB units", r.FractionMilli, pool.GPUMemoryMiB, pool.ShareUnitMiB)
	case intent.Whole:
		units, why = perGPU, "all of one GPU's units"
	default:
		return Assignment{}, fmt.Errorf("%s is a MIG slice, not a memory share", r)
	}
	if units > perGPU {
		return Assignment{}, fmt.Errorf("%d units of %d MiB exceed one GPU's %d units (%d MiB)", units, pool.ShareUnitMiB, perGPU, pool.GPUMemoryMiB)
	}
	return Assignment{Resource: pool.Resource, Quantity: units, GivenMiB: units * pool.ShareUnitMiB, Why: why}, nil
}

func fitWhole(r intent.Request, pool *inventory.Pool) (Assignment, error) {
	count := r.Count
	if err := seesWholeGPU(r, pool, "a whole GPU"); err != nil {
		return Assignment{}, err
	}
	if pool.GPUsPerNode > 0 && count > pool.GPUsPerNode {
		return Assignment{}, fmt.Errorf("%d GPUs in one container, but its nodes have at most %d", count, pool.GPUsPerNode)
	}
	why := fmt.Sprintf("%d whole GPU(s)", count)
	return Assignment{Resource: pool.Resource, Quantity: count, GivenMiB: pool.GPUMemoryMiB * count, Why: why}, nil
}

// seesWholeGPU says why r cannot take what, a device that sees its whole
// GPU (a whole GPU, a time-sliced replica): a MIG slice asked by name is
// not one, and a memory request must fit in the GPU; nil where it can.
func seesWholeGPU(r intent.Request, pool *inventory.Pool, what string) error {
	switch r.Form {
	case intent.Profile:
		return fmt.Errorf("%s is a MIG slice, not %s", r, what)
	case intent.Memory:
		if pool.GPUMemoryMiB < r.MemoryMiB {
			return fmt.Errorf("its GPUs have %d MiB, less than the %d MiB asked", pool.GPUMemoryMiB, r.MemoryMiB)
		}
	}
	return nil
}

// fitOneShare sizes a request on a pool where gpuadmit's agent cuts each GPU
// into SharesPerGPU equal shares and a container takes exactly one: the
// request must fit in one share. Taking one device only is what makes the
// stock scheduler's node-wide count a per-GPU count (allocator.ShareOffer).
func fitOneShare(r intent.Request, pool *inventory.Pool) (Assignment, error) {
	var need int64
	var what string
	switch r.Form {
	case intent.Memory:
		need, what = r.MemoryMiB, fmt.Sprintf("%d MiB", r.MemoryMiB)
	case intent.Fraction:
		// A fraction is of the GPU, and a share is 1/SharesPerGPU of it,
		// whatever MiB the rounding of either comes to.
		if r.FractionMilli*pool.SharesPerGPU > 1000 {
			return Assignment{}, fmt.Errorf("%d/1000 of a GPU exceeds the pool's one share size, 1/%d of a GPU (%d MiB)",
				r.FractionMilli, pool.SharesPerGPU, pool.ShareUnitMiB)
		}
		what = fmt.Sprintf("%d/1000 of a GPU", r.FractionMilli)
	case intent.Whole:
		return Assignment{}, fmt.Errorf("a whole GPU is not a share: the pool cuts each GPU into %d shares of %d MiB",
			pool.SharesPerGPU, pool.ShareUnitMiB)
	default:
		return Assignment{}, fmt.Errorf("%s is a MIG slice, not a memory share", r)
	}
	if need > pool.ShareUnitMiB {
		return Assignment{}, fmt.Errorf("%s exceeds the pool's one share size, %d MiB (each GPU is cut into %d shares)",
			what, pool.ShareUnitMiB, pool.SharesPerGPU)
	}
	why := fmt.Sprintf("%s fits the pool's one share size, %d MiB (1/%d of a GPU)", what, pool.ShareUnitMiB, pool.SharesPerGPU)
	return Assignment{Resource: pool.Resource, Quantity: 1, GivenMiB: pool.ShareUnitMiB, Why: why}, nil
}

// fitClaim sizes a share on a DRA pool: the memory, rounded up to the
// driver's step, asked of one GPU as consumable capacity. The scheduler
// places the claim on a GPU with that much room, so any size up to one
// GPU's shareable memory is fine; a whole GPU's fraction takes all of it.
func fitClaim(r intent.Request, pool *inventory.Pool) (Assignment, error) {
	step := pool.ShareUnitMiB
	most := pool.GPUMemoryMiB / step * step // the driver's default: every whole step
	var mib int64
	var why string
	switch r.Form {
	case intent.Memory:
		mib = allocator.ShareUnits(r.MemoryMiB, step) * step
		why = fmt.Sprintf("%d MiB rounded up to the driver's %d MiB step", r.MemoryMiB, step)
	case intent.Fraction:
		mib = allocator.FractionShareUnits(r.FractionMilli, pool.GPUMemoryMiB, step) * step
		why = fmt.Sprintf("%d/1000 of the GPU's %d MiB in whole %d MiB steps", r.FractionMilli, pool.GPUMemoryMiB, step)
	default:
		return Assignment{}, fmt.Errorf("%s is not a memory share", r)
	}
	if mib > most {
		return Assignment{}, fmt.Errorf("%d MiB exceed the %d MiB a share of one %d MiB GPU can have", mib, most, pool.GPUMemoryMiB)
	}
	return Assignment{GivenMiB: mib, ClaimMiB: mib, Why: why}, nil
}

// fitReplicas sizes a request on a time-sliced pool: one replica per GPU
// asked. A replica sees its whole GPU's memory and compute, shared with the
// GPU's other replicas, so a memory request fits when the GPU is that big
// and a fraction fits any replica; nothing makes it the container's alone.
// A replica accounts for its GPU's memory over the replicas.
func fitReplicas(r intent.Request, pool *inventory.Pool) (Assignment, error) {
	if err := seesWholeGPU(r, pool, "a time-sliced replica"); err != nil {
		return Assignment{}, err
	}
	if most := pool.GPUsPerNode * pool.ReplicasPerGPU; most > 0 && r.Count > most {
		return Assignment{}, fmt.Errorf("%d replicas in one container, but its nodes have at most %d", r.Count, most)
	}
	per := pool.GPUMemoryMiB / max(pool.ReplicasPerGPU, 1)
	why := fmt.Sprintf("%d time-sliced replica(s), each of a %d MiB GPU cut %d ways in time", r.Count, pool.GPUMemoryMiB, pool.ReplicasPerGPU)
	return Assignment{Resource: pool.Resource, Quantity: r.Count, GivenMiB: per * r.Count, Why: why}, nil
}
