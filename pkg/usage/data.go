package usage

import (
	"encoding/json"
	"sort"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// Config is data.gpuadmit.usage of the policy set: what the usage metrics
// need that the cluster cannot tell, kept in Git with the policies.
type Config struct {
	// PricePerGPUHour is what one GPU of each catalog model costs an hour
	// ({"H100-80GB": 2.5}), in whatever currency the operator counts in. A
	// model without a price exports no price series, and the rules leave
	// its cost out rather than counting it as free.
	PricePerGPUHour map[string]float64
	// Sizes are the requests that count as typical, whether or not a pod
	// asks for them now: free GPU memory that none of them and no pending
	// pod can use is stranded. Empty means only pending pods count.
	Sizes []Size
}

// Size is one typical request: GPUs GPUs of GPUMemoryMiB each, with
// MilliCPU and MemoryMiB of the node besides.
type Size struct {
	GPUMemoryMiB int64
	GPUs         int64
	MilliCPU     int64
	MemoryMiB    int64
}

// rawConfig is data.gpuadmit.usage as written.
type rawConfig struct {
	PricePerGPUHour map[string]float64 `json:"pricePerGPUHour"`
	Sizes           []rawSize          `json:"sizes"`
}

type rawSize struct {
	GPUMemory string `json:"gpuMemory"`
	GPUs      *int64 `json:"gpus"`
	CPU       string `json:"cpu"`
	Memory    string `json:"memory"`
}

// FromData reads data.gpuadmit.usage from a policy set's data; an absent
// document is the zero Config. Errors name the field
// (data.gpuadmit.usage.sizes[1].gpuMemory).
func FromData(data map[string]any) (Config, error) {
	g, _ := data["gpuadmit"].(map[string]any)
	doc, ok := g["usage"]
	if !ok || doc == nil {
		return Config{}, nil
	}
	root := field.NewPath("data", "gpuadmit", "usage")
	b, err := json.Marshal(doc)
	if err != nil {
		return Config{}, field.Invalid(root, doc, err.Error())
	}
	var raw rawConfig
	if err := json.Unmarshal(b, &raw); err != nil {
		return Config{}, field.Invalid(root, string(b), "want {pricePerGPUHour: {model: number}, sizes: [{gpuMemory, gpus, cpu, memory}]}: "+err.Error())
	}
	c := Config{PricePerGPUHour: raw.PricePerGPUHour}
	var errs field.ErrorList
	for _, m := range sortedKeys(raw.PricePerGPUHour) {
		if p := raw.PricePerGPUHour[m]; p < 0 {
			errs = append(errs, field.Invalid(root.Child("pricePerGPUHour").Key(m), p, "a price is not negative"))
		}
	}
	for i, rs := range raw.Sizes {
		s, serrs := rs.parse(root.Child("sizes").Index(i))
		c.Sizes, errs = append(c.Sizes, s), append(errs, serrs...)
	}
	return c, errs.ToAggregate()
}

// ValidSet refuses a policy set whose data.gpuadmit.usage FromData cannot read.
func ValidSet(s *policy.Set) error {
	_, err := FromData(s.Data)
	return err
}

func (r rawSize) parse(p *field.Path) (Size, field.ErrorList) {
	var errs field.ErrorList
	s := Size{GPUs: 1}
	if r.GPUs != nil {
		if s.GPUs = *r.GPUs; s.GPUs < 1 {
			errs = append(errs, field.Invalid(p.Child("gpus"), *r.GPUs, "at least 1"))
		}
	}
	q, err := resource.ParseQuantity(r.GPUMemory)
	if err != nil || q.Value() < 1<<20 {
		errs = append(errs, field.Invalid(p.Child("gpuMemory"), r.GPUMemory, "a byte quantity of at least 1Mi, such as 10Gi"))
	}
	s.GPUMemoryMiB = q.Value() >> 20
	s.MilliCPU, errs = optional(r.CPU, p.Child("cpu"), "a CPU quantity such as 4 or 500m", errs, func(q resource.Quantity) int64 { return q.MilliValue() })
	s.MemoryMiB, errs = optional(r.Memory, p.Child("memory"), "a byte quantity such as 16Gi", errs, func(q resource.Quantity) int64 { return q.Value() >> 20 })
	return s, errs
}

// optional parses an optional quantity: empty is 0.
func optional(v string, p *field.Path, want string, errs field.ErrorList, conv func(resource.Quantity) int64) (int64, field.ErrorList) {
	if v == "" {
		return 0, errs
	}
	q, err := resource.ParseQuantity(v)
	if err != nil || q.Sign() < 0 {
		return 0, append(errs, field.Invalid(p, v, want))
	}
	return conv(q), errs
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
