package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
)

// Write prints v to w as format: "table" (or ""), "json" or "html".
func Write(w io.Writer, format string, v View) error {
	switch format {
	case "", "table":
		return writeTable(w, v)
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "html":
		return writeHTML(w, v)
	}
	return fmt.Errorf("output %q: use table, json or html", format)
}

// writeTable prints v as tables a person reads in a terminal, in GiB.
func writeTable(w io.Writer, v View) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tMODEL\tMODE\tGPUS\tCAPACITY GiB\tALLOCATED GiB\tFREE GiB\tSTRANDED GiB\tFRAGMENTATION GiB\tPENDING PODS\tPENDING GiB\tCOST/H\tSTRANDED COST/H\t")
	for _, p := range v.Pools {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t\n", p.Name, dash(p.Model), dash(p.Mode), p.GPUs,
			gib(p.CapacityMiB), gib(p.AllocatedMiB), gib(p.FreeMiB), gib(p.StrandedMiB), gibf(p.FragmentationMiB),
			p.PendingPods, gib(p.PendingMiB), money(p.AllocatedCostPerHour), money(p.StrandedCostPerHour))
	}
	t := v.Total
	fmt.Fprintf(tw, "TOTAL\t\t\t%d\t%s\t%s\t%s\t%s\t\t%d\t%s\t%s\t%s\t\n", t.GPUs, gib(t.CapacityMiB), gib(t.AllocatedMiB),
		gib(t.FreeMiB), gib(t.StrandedMiB), t.PendingPods, gib(t.PendingMiB), money(&t.AllocatedCostPerHour), money(&t.StrandedCostPerHour))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	fmt.Fprintln(tw, "NAMESPACE\tALLOCATED GiB\tCOST/H\tPENDING PODS\tPENDING GiB\tQUOTA USED GiB\tQUOTA HARD GiB\t")
	for _, n := range v.Namespaces {
		used, hard := "-", "-"
		if n.QuotaHardMiB != nil {
			used, hard = gib(*n.QuotaUsedMiB), gib(*n.QuotaHardMiB)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t\n", n.Name, gib(n.AllocatedMiB), money(&n.CostPerHour),
			n.PendingPods, gib(n.PendingMiB), used, hard)
	}
	if len(v.GPUs) > 0 {
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
		fmt.Fprintln(tw, "GPU UUID\tNODE\tPOOL\tMODEL\tCAPACITY GiB\tALLOCATED GiB\t")
		for _, g := range v.GPUs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", g.UUID, g.Node, g.Pool, g.Model, gib(g.CapacityMiB), gib(g.AllocatedMiB))
		}
	}
	return tw.Flush()
}

func gib(mib int64) string { return strconv.FormatFloat(float64(mib)/1024, 'f', 1, 64) }

func gibf(mib float64) string { return strconv.FormatFloat(mib/1024, 'f', 1, 64) }

func money(p *float64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatFloat(*p, 'f', 2, 64)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
