package allocator

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Catalog is a validated, read-only set of GPU models, looked up by name or by
// the product name GPU Feature Discovery or NVML reports. It is safe for
// concurrent use; every model it returns is a copy.
type Catalog struct {
	models    []Model        // sorted by Name
	byName    map[string]int // lower-cased Name → index in models
	byProduct map[string]int // productKey → index in models
}

// defaultCatalog builds the built-in catalog once. Its data is checked by the
// package tests, so a failure here is a programming error.
var defaultCatalog = sync.OnceValue(func() *Catalog {
	c, err := NewCatalog(builtinModels()...)
	if err != nil {
		panic(fmt.Sprintf("allocator: built-in catalog: %v", err))
	}
	return c
})

// Default returns the built-in catalog. Every call returns the same Catalog.
func Default() *Catalog {
	return defaultCatalog()
}

// NewCatalog returns a catalog of models after checking them: names valid as
// Kubernetes label values and unique (ignoring case), products unique,
// memory sizes positive, profiles sorted by MemoryMiB then ComputeSlices,
// every profile able to run at least once and every placement inside the
// model's memory slices. The catalog keeps its own copy of models.
func NewCatalog(models ...Model) (*Catalog, error) {
	if err := validateModels(models); err != nil {
		return nil, fmt.Errorf("invalid catalog: %w", err)
	}
	c := &Catalog{
		models:    make([]Model, len(models)),
		byName:    make(map[string]int, len(models)),
		byProduct: make(map[string]int),
	}
	for i, m := range models {
		c.models[i] = m.clone()
	}
	slices.SortFunc(c.models, func(a, b Model) int { return strings.Compare(a.Name, b.Name) })
	for i, m := range c.models {
		c.byName[strings.ToLower(m.Name)] = i
		for _, p := range m.Products {
			c.byProduct[productKey(p)] = i
		}
	}
	return c, nil
}

// Models returns every model in the catalog, sorted by Name.
func (c *Catalog) Models() []Model {
	out := make([]Model, len(c.models))
	for i, m := range c.models {
		out[i] = m.clone()
	}
	return out
}

// Model returns the model called name, ignoring case.
func (c *Catalog) Model(name string) (Model, bool) {
	return c.lookup(c.byName, strings.ToLower(name))
}

// ByProduct returns the model a product name belongs to. It accepts GPU
// Feature Discovery's label ("NVIDIA-H100-80GB-HBM3"), NVML's name
// ("NVIDIA H100 80GB HBM3"), in any case and with spaces and dashes read
// alike, and a single-strategy MIG product ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"),
// which resolves to its base model.
func (c *Catalog) ByProduct(product string) (Model, bool) {
	if base, _, ok := SplitMIGProduct(product); ok {
		product = base
	}
	return c.lookup(c.byProduct, productKey(product))
}

func (c *Catalog) lookup(index map[string]int, key string) (Model, bool) {
	i, ok := index[key]
	if !ok {
		return Model{}, false
	}
	return c.models[i].clone(), true
}
