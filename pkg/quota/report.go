package quota

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// Report prints, per namespace with a gpuadmit ResourceQuota, used and hard
// GPU memory in GiB, in total and per model, and other GPU limits as counts.
func Report(ctx context.Context, c client.Reader, w io.Writer) error {
	var list corev1.ResourceQuotaList
	if err := c.List(ctx, &list, client.MatchingLabels{ManagedBy: managedValue}); err != nil {
		return fmt.Errorf("list ResourceQuotas: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Namespace < list.Items[j].Namespace })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tRESOURCE\tUSED\tHARD\tREVISION")
	for _, q := range list.Items {
		for _, r := range Resources(q.Spec.Hard) {
			name := corev1.ResourceName(r)
			used, hard := q.Status.Used[name], q.Status.Hard[name]
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", q.Namespace, label(r), amount(r, used.Value()), amount(r, hard.Value()), q.Labels[RevisionLabel])
		}
	}
	return tw.Flush()
}

// label names a quota line: "GPU memory", "H100-80GB memory", or the resource.
func label(r string) string {
	r = strings.TrimPrefix(r, "requests.")
	switch {
	case r == inventory.ResourceMemoryMiB:
		return "GPU memory"
	case inventory.IsAccountingResource(r):
		return strings.TrimSuffix(strings.TrimPrefix(r, "gpuadmit.io/"), "-mib") + " memory"
	}
	return r
}

// amount shows MiB as GiB with one decimal, counts as they are.
func amount(r string, v int64) string {
	if inventory.IsAccountingResource(strings.TrimPrefix(r, "requests.")) {
		return fmt.Sprintf("%.1f GiB", float64(v)/1024)
	}
	return fmt.Sprint(v)
}
