package report

import (
	"math"
	"sort"

	"github.com/gpuadmit/gpuadmit/pkg/usage"
)

// View is a usage.Report as the report prints it.
type View struct {
	// Total sums the pools (NoPool's pending pods included).
	Total Total `json:"total"`
	// Pools are the report's pools in its order (by name, then NoPool).
	Pools []PoolView `json:"pools"`
	// Namespaces are every namespace that holds, waits for or has a quota
	// on GPU memory, by name.
	Namespaces []NamespaceView `json:"namespaces"`
	// GPUs are the GPUs whose allocation is known one by one (DRA).
	GPUs []GPUView `json:"gpus"`
}

// GPUView is one GPU whose allocation is known, under its UUID as DCGM's
// exporter names it.
type GPUView struct {
	UUID         string `json:"uuid"`
	Node         string `json:"node"`
	Pool         string `json:"pool"`
	Model        string `json:"model"`
	CapacityMiB  int64  `json:"capacityMiB"`
	AllocatedMiB int64  `json:"allocatedMiB"`
}

// Total is the cluster's figures. Costs count the models with a price only.
type Total struct {
	GPUs                 int64   `json:"gpus"`
	CapacityMiB          int64   `json:"capacityMiB"`
	AllocatedMiB         int64   `json:"allocatedMiB"`
	FreeMiB              int64   `json:"freeMiB"`
	StrandedMiB          int64   `json:"strandedMiB"`
	PendingPods          int64   `json:"pendingPods"`
	PendingMiB           int64   `json:"pendingMiB"`
	AllocatedCostPerHour float64 `json:"allocatedCostPerHour"`
	StrandedCostPerHour  float64 `json:"strandedCostPerHour"`
}

// PoolView is one pool. GPU figures are MiB over one GPU's MiB; costs are
// those GPUs at the model's price, absent when the model has none.
type PoolView struct {
	Name                 string       `json:"name"`
	Model                string       `json:"model,omitempty"`
	Mode                 string       `json:"mode,omitempty"`
	GPUs                 int64        `json:"gpus"`
	GPUMemoryMiB         int64        `json:"gpuMemoryMiB"`
	CapacityMiB          int64        `json:"capacityMiB"`
	AllocatedMiB         int64        `json:"allocatedMiB"`
	FreeMiB              int64        `json:"freeMiB"`
	StrandedMiB          int64        `json:"strandedMiB"`
	FragmentationMiB     float64      `json:"fragmentationMiB"`
	AllocatedGPUs        float64      `json:"allocatedGPUs"`
	FreeGPUs             float64      `json:"freeGPUs"`
	StrandedGPUs         float64      `json:"strandedGPUs"`
	PendingPods          int64        `json:"pendingPods"`
	PendingMiB           int64        `json:"pendingMiB"`
	PricePerGPUHour      *float64     `json:"pricePerGPUHour,omitempty"`
	AllocatedCostPerHour *float64     `json:"allocatedCostPerHour,omitempty"`
	StrandedCostPerHour  *float64     `json:"strandedCostPerHour,omitempty"`
	Allocated            []Allocation `json:"allocated"`
	Pending              []Pending    `json:"pending"`
}

// Allocation is what one namespace holds of a pool in one form.
type Allocation struct {
	Namespace string  `json:"namespace"`
	Form      string  `json:"form"`
	MiB       int64   `json:"mib"`
	GPUs      float64 `json:"gpus"`
}

// Pending is what one namespace's pods wait for on a pool, for one reason.
type Pending struct {
	Namespace string `json:"namespace"`
	Reason    string `json:"reason"`
	Pods      int64  `json:"pods"`
	MiB       int64  `json:"mib"`
}

// NamespaceView is one namespace over every pool. CostPerHour counts the
// models with a price only; quota figures are absent without a gpuadmit quota.
type NamespaceView struct {
	Name         string   `json:"name"`
	AllocatedMiB int64    `json:"allocatedMiB"`
	CostPerHour  float64  `json:"costPerHour"`
	PendingPods  int64    `json:"pendingPods"`
	PendingMiB   int64    `json:"pendingMiB"`
	QuotaHardMiB *int64   `json:"quotaHardMiB,omitempty"`
	QuotaUsedMiB *int64   `json:"quotaUsedMiB,omitempty"`
	QuotaUsed    *float64 `json:"quotaUsed,omitempty"` // used over hard, when hard > 0
}

// Of is r as the report prints it.
func Of(r usage.Report) View {
	v := View{Pools: []PoolView{}, Namespaces: []NamespaceView{}, GPUs: []GPUView{}}
	for _, g := range r.GPUs {
		v.GPUs = append(v.GPUs, GPUView{UUID: g.UUID, Node: g.Node, Pool: g.Pool, Model: g.Model, CapacityMiB: g.CapacityMiB, AllocatedMiB: g.AllocatedMiB})
	}
	ns := map[string]*NamespaceView{}
	nsOf := func(name string) *NamespaceView {
		if ns[name] == nil {
			ns[name] = &NamespaceView{Name: name}
		}
		return ns[name]
	}
	for _, p := range r.Pools {
		pv := poolView(p, r.Prices)
		v.Pools = append(v.Pools, pv)
		v.Total.add(pv)
		for _, a := range pv.Allocated {
			n := nsOf(a.Namespace)
			n.AllocatedMiB += a.MiB
			if pv.PricePerGPUHour != nil {
				n.CostPerHour = round2(n.CostPerHour + a.GPUs**pv.PricePerGPUHour)
			}
		}
		for _, w := range pv.Pending {
			n := nsOf(w.Namespace)
			n.PendingPods += w.Pods
			n.PendingMiB += w.MiB
		}
	}
	for _, q := range r.Quotas {
		n := nsOf(q.Namespace)
		n.QuotaHardMiB, n.QuotaUsedMiB = ptr(q.HardMiB), ptr(q.UsedMiB)
		if q.HardMiB > 0 {
			n.QuotaUsed = ptr(round2(float64(q.UsedMiB) / float64(q.HardMiB)))
		}
	}
	for _, name := range sortedNames(ns) {
		v.Namespaces = append(v.Namespaces, *ns[name])
	}
	return v
}

func poolView(p usage.Pool, prices map[string]float64) PoolView {
	gpus := func(mib int64) float64 {
		if p.GPUMemoryMiB <= 0 {
			return 0
		}
		return round2(float64(mib) / float64(p.GPUMemoryMiB))
	}
	pv := PoolView{Name: p.Name, Model: p.Model, Mode: string(p.Mode), GPUs: p.GPUs, GPUMemoryMiB: p.GPUMemoryMiB,
		CapacityMiB: p.CapacityMiB, FreeMiB: p.FreeMiB, StrandedMiB: p.StrandedMiB,
		FragmentationMiB: math.Round(p.FragmentationMiB*10) / 10,
		Allocated:        []Allocation{}, Pending: []Pending{}}
	for h, mib := range p.Allocated {
		pv.Allocated = append(pv.Allocated, Allocation{Namespace: h.Namespace, Form: string(h.Form), MiB: mib, GPUs: gpus(mib)})
		pv.AllocatedMiB += mib
	}
	sort.Slice(pv.Allocated, func(i, j int) bool {
		a, b := pv.Allocated[i], pv.Allocated[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Form < b.Form
	})
	for w, n := range p.Pending {
		pv.Pending = append(pv.Pending, Pending{Namespace: w.Namespace, Reason: string(w.Reason), Pods: n.Pods, MiB: n.MiB})
		pv.PendingPods += n.Pods
		pv.PendingMiB += n.MiB
	}
	sort.Slice(pv.Pending, func(i, j int) bool {
		a, b := pv.Pending[i], pv.Pending[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Reason < b.Reason
	})
	pv.AllocatedGPUs, pv.FreeGPUs, pv.StrandedGPUs = gpus(pv.AllocatedMiB), gpus(pv.FreeMiB), gpus(pv.StrandedMiB)
	if price, ok := prices[p.Model]; ok && p.Name != usage.NoPool {
		pv.PricePerGPUHour = ptr(price)
		pv.AllocatedCostPerHour = ptr(round2(pv.AllocatedGPUs * price))
		pv.StrandedCostPerHour = ptr(round2(pv.StrandedGPUs * price))
	}
	return pv
}

func (t *Total) add(p PoolView) {
	t.GPUs += p.GPUs
	t.CapacityMiB += p.CapacityMiB
	t.AllocatedMiB += p.AllocatedMiB
	t.FreeMiB += p.FreeMiB
	t.StrandedMiB += p.StrandedMiB
	t.PendingPods += p.PendingPods
	t.PendingMiB += p.PendingMiB
	if p.AllocatedCostPerHour != nil {
		t.AllocatedCostPerHour = round2(t.AllocatedCostPerHour + *p.AllocatedCostPerHour)
		t.StrandedCostPerHour = round2(t.StrandedCostPerHour + *p.StrandedCostPerHour)
	}
}

// round2 rounds to two decimals: cents, and hundredths of a GPU.
func round2(f float64) float64 { return math.Round(f*100) / 100 }

func ptr[T any](v T) *T { return &v }

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
