package report

import (
	"fmt"
	"io"
	"strconv"
)

// writeHTML prints v as one HTML page that needs nothing else: styles
// inline, charts as inline SVG, no script, no link. Every figure of v's
// JSON is in a cell marked data-k with its JSON path
// (data-k="pools[0].strandedMiB"), printed as the JSON prints it.
func writeHTML(w io.Writer, v View) error {
	return page.Execute(w, pageData{
		Tables: tables(v),
		Charts: []chart{poolChart(v), namespaceChart(v, "GPU memory allocated by namespace (GiB)", func(n NamespaceView) float64 { return float64(n.AllocatedMiB) / 1024 }),
			namespaceChart(v, "Cost per hour by namespace", func(n NamespaceView) float64 { return n.CostPerHour })},
	})
}

type pageData struct {
	Tables []table
	Charts []chart
}

// table is one table of figures; each cell knows its JSON path.
type table struct {
	Title   string
	Headers []string
	Rows    [][]cell
}

type cell struct{ Key, Text string }

func num[T int64 | float64](f T) string { return strconv.FormatFloat(float64(f), 'f', -1, 64) }

func tables(v View) []table {
	pools, alloc, pend := poolTables(v.Pools)
	return []table{totalTable(v.Total), pools, namespaceTable(v.Namespaces), alloc, pend, gpuTable(v.GPUs)}
}

func totalTable(t Total) table {
	return table{Title: "Cluster", Headers: []string{"GPUs", "capacity MiB", "allocated MiB", "free MiB", "stranded MiB", "pending pods", "pending MiB", "cost / hour", "stranded cost / hour"},
		Rows: [][]cell{{{"total.gpus", num(t.GPUs)}, {"total.capacityMiB", num(t.CapacityMiB)}, {"total.allocatedMiB", num(t.AllocatedMiB)},
			{"total.freeMiB", num(t.FreeMiB)}, {"total.strandedMiB", num(t.StrandedMiB)}, {"total.pendingPods", num(t.PendingPods)},
			{"total.pendingMiB", num(t.PendingMiB)}, {"total.allocatedCostPerHour", num(t.AllocatedCostPerHour)}, {"total.strandedCostPerHour", num(t.StrandedCostPerHour)}}}}
}

// poolTables are the pools, what each namespace holds of them, and what
// each namespace waits for on them.
func poolTables(ps []PoolView) (pools, alloc, pend table) {
	pools = table{Title: "Pools", Headers: []string{"pool", "model", "mode", "GPUs", "GPU MiB", "capacity MiB", "allocated MiB", "free MiB", "stranded MiB",
		"fragmentation MiB", "allocated GPUs", "free GPUs", "stranded GPUs", "pending pods", "pending MiB", "price / GPU-hour", "cost / hour", "stranded cost / hour"}}
	alloc = table{Title: "Allocated", Headers: []string{"pool", "namespace", "form", "MiB", "GPUs"}}
	pend = table{Title: "Pending", Headers: []string{"pool", "namespace", "reason", "pods", "MiB"}}
	for i, p := range ps {
		pools.Rows = append(pools.Rows, poolRow(fmt.Sprintf("pools[%d].", i), p))
		for j, a := range p.Allocated {
			k := func(f string) string { return fmt.Sprintf("pools[%d].allocated[%d].%s", i, j, f) }
			alloc.Rows = append(alloc.Rows, []cell{{Text: p.Name}, {k("namespace"), a.Namespace}, {k("form"), a.Form}, {k("mib"), num(a.MiB)}, {k("gpus"), num(a.GPUs)}})
		}
		for j, w := range p.Pending {
			k := func(f string) string { return fmt.Sprintf("pools[%d].pending[%d].%s", i, j, f) }
			pend.Rows = append(pend.Rows, []cell{{Text: p.Name}, {k("namespace"), w.Namespace}, {k("reason"), w.Reason}, {k("pods"), num(w.Pods)}, {k("mib"), num(w.MiB)}})
		}
	}
	return pools, alloc, pend
}

// poolRow is one pool's figures, their keys under prefix.
func poolRow(prefix string, p PoolView) []cell {
	k := func(f string) string { return prefix + f }
	return []cell{{k("name"), p.Name}, {k("model"), p.Model}, {k("mode"), p.Mode}, {k("gpus"), num(p.GPUs)},
		{k("gpuMemoryMiB"), num(p.GPUMemoryMiB)}, {k("capacityMiB"), num(p.CapacityMiB)}, {k("allocatedMiB"), num(p.AllocatedMiB)},
		{k("freeMiB"), num(p.FreeMiB)}, {k("strandedMiB"), num(p.StrandedMiB)}, {k("fragmentationMiB"), num(p.FragmentationMiB)},
		{k("allocatedGPUs"), num(p.AllocatedGPUs)}, {k("freeGPUs"), num(p.FreeGPUs)}, {k("strandedGPUs"), num(p.StrandedGPUs)},
		{k("pendingPods"), num(p.PendingPods)}, {k("pendingMiB"), num(p.PendingMiB)},
		optional(k("pricePerGPUHour"), p.PricePerGPUHour), optional(k("allocatedCostPerHour"), p.AllocatedCostPerHour),
		optional(k("strandedCostPerHour"), p.StrandedCostPerHour)}
}

func namespaceTable(ns []NamespaceView) table {
	t := table{Title: "Namespaces", Headers: []string{"namespace", "allocated MiB", "cost / hour", "pending pods", "pending MiB", "quota used MiB", "quota hard MiB", "quota used"}}
	for i, n := range ns {
		k := func(f string) string { return fmt.Sprintf("namespaces[%d].%s", i, f) }
		t.Rows = append(t.Rows, []cell{{k("name"), n.Name}, {k("allocatedMiB"), num(n.AllocatedMiB)}, {k("costPerHour"), num(n.CostPerHour)},
			{k("pendingPods"), num(n.PendingPods)}, {k("pendingMiB"), num(n.PendingMiB)},
			optional(k("quotaUsedMiB"), n.QuotaUsedMiB), optional(k("quotaHardMiB"), n.QuotaHardMiB), optional(k("quotaUsed"), n.QuotaUsed)})
	}
	return t
}

func gpuTable(gs []GPUView) table {
	t := table{Title: "GPUs known one by one (DRA)", Headers: []string{"UUID", "node", "pool", "model", "capacity MiB", "allocated MiB"}}
	for i, g := range gs {
		k := func(f string) string { return fmt.Sprintf("gpus[%d].%s", i, f) }
		t.Rows = append(t.Rows, []cell{{k("uuid"), g.UUID}, {k("node"), g.Node}, {k("pool"), g.Pool}, {k("model"), g.Model},
			{k("capacityMiB"), num(g.CapacityMiB)}, {k("allocatedMiB"), num(g.AllocatedMiB)}})
	}
	return t
}

// optional is a figure the JSON leaves out when absent: "-", with no key.
func optional[T int64 | float64](key string, v *T) cell {
	if v == nil {
		return cell{Text: "-"}
	}
	return cell{key, num(*v)}
}
