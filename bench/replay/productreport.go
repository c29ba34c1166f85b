package replay

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
)

// productMarkdown says how the webhook wrote the pods of each product-path
// configuration, and states the product path's placement targets for them.
func (r *Report) productMarkdown(w io.Writer) {
	byConfig := map[string]*Replayed{}
	for i := range r.Replayed {
		if x := &r.Replayed[i]; x.Product != nil {
			byConfig[x.Config] = x
		}
	}
	if len(byConfig) == 0 {
		return
	}
	fmt.Fprintln(w, "\nThe product's path: GPU pods as gpuadmit's webhook wrote them (each checked to carry its record):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| run | GPU pods admitted | with DRA alternatives | on one pool | denied by the webhook | claim templates | creates retried after a webhook error |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, c := range ProductConfigurations {
		if x := byConfig[c]; x != nil {
			p := x.Product
			fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %d |\n", c, p.Admitted, p.Alternatives, p.OnePool, p.Denied, p.Templates, p.WebhookRetries)
		}
	}
	fmt.Fprintln(w)
	sim := func(policy string) float64 {
		for _, s := range r.Simulated {
			if s.Policy == policy {
				return s.At(1).UnallocatedPct
			}
		}
		return math.NaN()
	}
	if g := byConfig[ProductGPUAdmit]; g != nil {
		got := g.At(1).UnallocatedPct
		d := got - sim("gpuadmit")
		fmt.Fprintf(w, "- webhook + gpuadmit-scheduler vs simulator gpuadmit: %+.2f pp (target within 0.5: %s)\n", d, mark(math.Abs(d) <= 0.5))
		fmt.Fprintf(w, "- webhook + gpuadmit-scheduler vs simulator FGD: %+.2f pp (target below: %s)\n", got-sim("fgd"), mark(got < sim("fgd")))
	}
	if s, o := byConfig[ProductStock], byConfig[ProductOnePool]; s != nil && o != nil {
		a, b := s.At(1).UnallocatedPct, o.At(1).UnallocatedPct
		fmt.Fprintf(w, "- webhook + stock scheduler vs today's webhook (one pool) + stock scheduler: %+.2f pp (target below: %s)\n", a-b, mark(a < b))
	}
}

// summaryHeader is summary.csv's header: one row per replayed
// configuration and per simulated policy.
var summaryHeader = []string{"workload", "seed", "nodes", "gpus", "pods", "run", "scheduler",
	"unallocated_pct_100", "unallocated_pct_90", "placed", "pending", "admitted", "alternatives", "one_pool", "denied", "templates"}

// writeSummaryCSV writes the figures at 100% and 90% arrived, small enough
// to keep beside the docs (results.json holds every pod's placement).
func (r *Report) writeSummaryCSV(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	cw := csv.NewWriter(f)
	s := r.Settings
	head := []string{s.Workload, strconv.FormatUint(s.Seed, 10), strconv.Itoa(s.Nodes), strconv.Itoa(s.GPUs), strconv.Itoa(s.Pods)}
	pct := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	rows := [][]string{summaryHeader}
	for _, x := range r.Replayed {
		p := ProductCheck{Admitted: -1, Alternatives: -1, OnePool: -1, Denied: -1, Templates: -1}
		if x.Product != nil {
			p = *x.Product
		}
		rows = append(rows, slices.Concat(head, []string{"replay:" + x.Config, x.SchedulerName, pct(x.At(1).UnallocatedPct), pct(x.At(0.9).UnallocatedPct),
			strconv.Itoa(x.Bound), strconv.Itoa(x.Pending), strconv.Itoa(p.Admitted), strconv.Itoa(p.Alternatives), strconv.Itoa(p.OnePool),
			strconv.Itoa(p.Denied), strconv.Itoa(p.Templates)}))
	}
	for _, x := range r.Simulated {
		rows = append(rows, slices.Concat(head, []string{"simulator:" + x.Policy, "", pct(x.At(1).UnallocatedPct), pct(x.At(0.9).UnallocatedPct),
			strconv.Itoa(s.Pods - x.Failed), strconv.Itoa(x.Failed), "", "", "", "", ""}))
	}
	if err := cw.WriteAll(rows); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
