package quota

import (
	"encoding/json"
	"regexp"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// Declaration is one entry of data.gpuadmit.quotas (policies/quotas.yaml).
type Declaration struct {
	// Namespaces and NamespaceSelector say which namespaces it governs; set one of them.
	Namespaces        []string              `json:"namespaces,omitempty"`
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// GPUMemory caps GPU memory in every form ("200Gi").
	GPUMemory *resource.Quantity `json:"gpuMemory,omitempty"`
	// Models caps GPU memory per catalog model ({"H100-80GB": "80Gi"}).
	Models map[string]resource.Quantity `json:"models,omitempty"`
	// Profiles caps MIG slices per profile ({"1g.10gb": 4}).
	Profiles map[string]int64 `json:"profiles,omitempty"`
	// WholeGPUs caps nvidia.com/gpu (whole GPUs and MIG-single slices).
	WholeGPUs *int64 `json:"wholeGPUs,omitempty"`
}

var profileName = regexp.MustCompile(`^[0-9]+g\.[0-9]+gb(\+me)?$`)

// Parse reads and checks data.gpuadmit.quotas; an absent document means no
// quotas. Errors name the entry and field (data.gpuadmit.quotas[2].gpuMemory).
func Parse(doc any) ([]Declaration, error) {
	if doc == nil {
		return nil, nil
	}
	root := field.NewPath("data", "gpuadmit", "quotas")
	entries, ok := doc.([]any)
	if !ok {
		return nil, field.Invalid(root, doc, "must be a list of quota declarations")
	}
	decls := make([]Declaration, 0, len(entries))
	var errs field.ErrorList
	for i, e := range entries {
		d, derrs := parseEntry(e, root.Index(i))
		decls, errs = append(decls, d), append(errs, derrs...)
	}
	return decls, errs.ToAggregate()
}

// rawDeclaration is a Declaration with quantities still as written, so a
// malformed one is reported at its own path.
type rawDeclaration struct {
	Declaration
	GPUMemory *string           `json:"gpuMemory,omitempty"`
	Models    map[string]string `json:"models,omitempty"`
}

func parseEntry(e any, p *field.Path) (Declaration, field.ErrorList) {
	b, err := json.Marshal(e)
	if err != nil {
		return Declaration{}, field.ErrorList{field.Invalid(p, e, err.Error())}
	}
	var raw rawDeclaration
	if err := json.Unmarshal(b, &raw); err != nil {
		return Declaration{}, field.ErrorList{field.Invalid(p, string(b), err.Error())}
	}
	d, errs := raw.Declaration, field.ErrorList{}
	if raw.GPUMemory != nil {
		q, err := resource.ParseQuantity(*raw.GPUMemory)
		if err != nil {
			errs = append(errs, field.Invalid(p.Child("gpuMemory"), *raw.GPUMemory, "a byte quantity such as 200Gi"))
		}
		d.GPUMemory = &q
	}
	for m, v := range raw.Models {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			errs = append(errs, field.Invalid(p.Child("models").Key(m), v, "a byte quantity such as 80Gi"))
		}
		if d.Models == nil {
			d.Models = map[string]resource.Quantity{}
		}
		d.Models[m] = q
	}
	return d, append(errs, d.validate(p)...)
}

func (d Declaration) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if (len(d.Namespaces) == 0) == (d.NamespaceSelector == nil) {
		errs = append(errs, field.Required(p, "set either namespaces or namespaceSelector"))
	}
	if d.NamespaceSelector != nil {
		if _, err := metav1.LabelSelectorAsSelector(d.NamespaceSelector); err != nil {
			errs = append(errs, field.Invalid(p.Child("namespaceSelector"), d.NamespaceSelector, err.Error()))
		}
	}
	if d.GPUMemory != nil && d.GPUMemory.Sign() < 0 {
		errs = append(errs, field.Invalid(p.Child("gpuMemory"), d.GPUMemory.String(), "must not be negative"))
	}
	for m, q := range d.Models {
		if _, ok := allocator.Default().Model(m); !ok {
			errs = append(errs, field.NotSupported(p.Child("models").Key(m), m, modelNames()))
		} else if q.Sign() < 0 {
			errs = append(errs, field.Invalid(p.Child("models").Key(m), q.String(), "must not be negative"))
		}
	}
	for pr, n := range d.Profiles {
		if !profileName.MatchString(allocator.NormalizeProfile(pr)) || n < 0 {
			errs = append(errs, field.Invalid(p.Child("profiles").Key(pr), n, "a MIG profile such as 1g.10gb and a count of at least 0"))
		}
	}
	if d.WholeGPUs != nil && *d.WholeGPUs < 0 {
		errs = append(errs, field.Invalid(p.Child("wholeGPUs"), *d.WholeGPUs, "must not be negative"))
	}
	return errs
}

func modelNames() []string {
	var names []string
	for _, m := range allocator.Default().Models() {
		names = append(names, m.Name)
	}
	return names
}

// Matches reports whether the declaration governs the namespace.
func (d Declaration) Matches(ns *corev1.Namespace) bool {
	for _, n := range d.Namespaces {
		if n == ns.Name {
			return true
		}
	}
	if d.NamespaceSelector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(d.NamespaceSelector)
	return err == nil && sel.Matches(labels.Set(ns.Labels))
}

// For returns the first declaration that governs the namespace.
func For(decls []Declaration, ns *corev1.Namespace) (Declaration, bool) {
	for _, d := range decls {
		if d.Matches(ns) {
			return d, true
		}
	}
	return Declaration{}, false
}

// Hard is the ResourceQuota spec.hard that enforces the declaration.
func (d Declaration) Hard() corev1.ResourceList {
	hard := corev1.ResourceList{}
	if d.GPUMemory != nil {
		hard[requests(inventory.ResourceMemoryMiB)] = mib(*d.GPUMemory)
	}
	for m, q := range d.Models {
		model, _ := allocator.Default().Model(m)
		hard[requests(inventory.ModelResource(model.Name))] = mib(q)
	}
	for pr, n := range d.Profiles {
		hard[requests(inventory.MIGResource(pr))] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	if d.WholeGPUs != nil {
		hard[requests(inventory.ResourceGPU)] = *resource.NewQuantity(*d.WholeGPUs, resource.DecimalSI)
	}
	return hard
}

func requests(r string) corev1.ResourceName { return corev1.ResourceName("requests." + r) }

// mib converts a byte quantity to whole MiB, rounding down: a quota never grants more than declared.
func mib(q resource.Quantity) resource.Quantity {
	return *resource.NewQuantity(q.Value()>>20, resource.DecimalSI)
}

// Resources lists the accounting and GPU resources a report shows, sorted.
func Resources(l corev1.ResourceList) []string {
	var out []string
	for r := range l {
		out = append(out, string(r))
	}
	sort.Strings(out)
	return out
}

// FromData reads the declarations of a policy set's data documents.
func FromData(data map[string]any) ([]Declaration, error) {
	g, _ := data["gpuadmit"].(map[string]any)
	return Parse(g["quotas"])
}

// ValidSet refuses a policy set whose quota declarations do not parse. The
// webhook's policy engine runs it before a set goes live (an invalid
// quotas.yaml never replaces the last good quotas), and the offline CLI runs
// it too, so `gpuadmit mutate --policies` and `gpuadmit test` refuse what
// the webhook would.
func ValidSet(s *policy.Set) error {
	_, err := FromData(s.Data)
	return err
}
