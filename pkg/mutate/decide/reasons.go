package decide

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gpuadmit/gpuadmit/pkg/intent"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// notOffered says, for each pool of the inventory that no candidate names,
// that the policy did not offer it and what kind of pool it is, so that a
// "no placement" denial accounts for every pool, not only those tried.
func notOffered(want intent.Pod, d policy.Decision, inv *inventory.Inventory) []string {
	offered := poolOrder(want, d)
	var out []string
	for _, p := range inv.Pools {
		if slices.Contains(offered, p.Name) {
			continue
		}
		out = append(out, fmt.Sprintf("pool %s: policy revision %s offers no candidate on it (a %s pool of %s, product %s)%s",
			p.Name, d.Revision, poolKind(p), p.Model, p.Product, selectorNote(p)))
	}
	return out
}

// selectorNote adds the hint a MIG single-strategy pool needs: whole-GPU
// requests reach it by selecting it, as NVIDIA's MIG single strategy expects.
func selectorNote(p *inventory.Pool) string {
	if p.Mode != inventory.MIGSingle {
		return ""
	}
	return fmt.Sprintf("; nvidia.com/gpu reaches it with the nodeSelector %s", FormatSelector(p.NodeSelector))
}

// FormatSelector writes a node selector as "key=value,key=value", sorted by key.
func FormatSelector(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}
