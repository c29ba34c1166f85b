package replay

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
)

// usageRows are the arrival points the summary shows of the usage trace.
var usageRows = []float64{0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1}

// usageMarkdown writes the usage trace's summary: per configuration, the
// mean of each figure over the trace's points, then the figures at a few
// points.
func (r *Report) usageMarkdown(w io.Writer) {
	if !r.hasUsage() {
		return
	}
	fmt.Fprintln(w, "\ngpuadmit's usage figures (pkg/usage, what the webhook's leader exports) over the arrival, in % of GPU capacity:")
	fmt.Fprintln(w, "stranded as the leader counts it (gpuadmit's pods only, the pod list's GPU requests as typical sizes), counting the CPU")
	fmt.Fprintln(w, "and memory of the pods without GPU too, and with the default policy's sizes (100, 250, 500 MiB of a 1000 MiB GPU) instead:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| run | arrived | stranded % | stranded, all pods % | stranded, policy sizes % | fragmentation % | free % | allocated % | pending GPU pods |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, x := range r.Replayed {
		if len(x.Usage) == 0 {
			continue
		}
		m := meanUsage(x.Usage)
		fmt.Fprintf(w, "| %s | mean of %d points, %.0f–%.0f%% | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f |\n", x.Config, len(x.Usage),
			100*x.Usage[0].Arrived, 100*x.Usage[len(x.Usage)-1].Arrived, m[0], m[1], m[2], m[3], m[4], m[5], m[6])
	}
	for _, at := range usageRows {
		for _, x := range r.Replayed {
			u, ok := usageAt(x.Usage, at)
			if !ok {
				continue
			}
			fmt.Fprintf(w, "| %s | %.0f%% | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %d |\n", x.Config, 100*at, u.StrandedPct(),
				pct(u.StrandedAllPodsMiB, u.CapacityMiB), pct(u.StrandedPolicySizesMiB, u.CapacityMiB), u.FragmentationPct(),
				pct(u.FreeMiB, u.CapacityMiB), pct(u.AllocatedMiB, u.CapacityMiB), u.PendingPods)
		}
	}
}

func (r *Report) hasUsage() bool {
	for _, x := range r.Replayed {
		if len(x.Usage) > 0 {
			return true
		}
	}
	return false
}

// meanUsage is the mean over us of stranded, stranded with all pods,
// stranded with the policy's sizes, fragmentation, free and allocated (in
// % of capacity) and pending pods.
func meanUsage(us []UsagePoint) [7]float64 {
	var m [7]float64
	for _, u := range us {
		m[0] += u.StrandedPct()
		m[1] += pct(u.StrandedAllPodsMiB, u.CapacityMiB)
		m[2] += pct(u.StrandedPolicySizesMiB, u.CapacityMiB)
		m[3] += u.FragmentationPct()
		m[4] += pct(u.FreeMiB, u.CapacityMiB)
		m[5] += pct(u.AllocatedMiB, u.CapacityMiB)
		m[6] += float64(u.PendingPods)
	}
	for i := range m {
		m[i] /= float64(len(us))
	}
	return m
}

func usageAt(us []UsagePoint, arrived float64) (UsagePoint, bool) {
	for _, u := range us {
		if math.Abs(u.Arrived-arrived) < 1e-9 {
			return u, true
		}
	}
	return UsagePoint{}, false
}

// usageHeader is usage.csv's header.
var usageHeader = []string{"config", "arrived", "pods", "capacity_mib", "allocated_mib", "free_mib", "stranded_mib",
	"stranded_all_pods_mib", "stranded_policy_sizes_mib", "fragmentation_mib", "pending_pods", "pending_mib"}

// writeUsageCSV writes every configuration's usage trace, a row per point.
func (r *Report) writeUsageCSV(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	cw := csv.NewWriter(f)
	cw.Write(usageHeader)
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	for _, x := range r.Replayed {
		for _, u := range x.Usage {
			cw.Write([]string{x.Config, strconv.FormatFloat(u.Arrived, 'f', 2, 64), strconv.Itoa(u.Pods), i(u.CapacityMiB),
				i(u.AllocatedMiB), i(u.FreeMiB), i(u.StrandedMiB), i(u.StrandedAllPodsMiB), i(u.StrandedPolicySizesMiB),
				strconv.FormatFloat(u.FragmentationMiB, 'f', 1, 64), i(u.PendingPods), i(u.PendingMiB)})
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
