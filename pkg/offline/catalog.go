package offline

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// Catalog prints the allocator's GPU models and MIG profiles, as a table or as JSON.
func Catalog(w io.Writer, format string) error {
	models := allocator.Default().Models()
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(models)
	case "", "table":
		return catalogTable(w, models)
	default:
		return fmt.Errorf("output %q: use table or json", format)
	}
}

func catalogTable(w io.Writer, models []allocator.Model) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tPROFILE\tMiB\tSMs\tCOMPUTE\tMEMORY SLICES\tMAX\tPLACEMENTS")
	for _, m := range models {
		fmt.Fprintf(tw, "%s\t(whole GPU)\t%d\t%d\t%d\t%d\t\t\n", m.Name, m.MemoryMiB, m.SMs, m.ComputeSlices, m.MemorySlices)
		for _, p := range m.Profiles {
			fmt.Fprintf(tw, "\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", p.Name, p.MemoryMiB, p.SMs, p.ComputeSlices, p.MemorySlices, p.MaxInstances, placements(p.Placements))
		}
	}
	return tw.Flush()
}

func placements(ps []allocator.Placement) string {
	s := ""
	for i, p := range ps {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%d+%d", p.Start, p.Size)
	}
	return s
}
