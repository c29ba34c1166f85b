package allocator

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDefaultIsOneValidCatalog(t *testing.T) {
	if Default() != Default() {
		t.Error("Default returned two different catalogs")
	}
	if _, err := NewCatalog(builtinModels()...); err != nil {
		t.Fatalf("built-in models: %v", err)
	}
	models := Default().Models()
	names := make([]string, len(models))
	for i, m := range models {
		names[i] = m.Name
	}
	want := []string{
		"A10", "A100-40GB", "A100-80GB", "A30-24GB", "H100-80GB", "H100-94GB", "H100-PCIE-80GB",
		"H200-141GB", "L4", "L40S", "P100-16GB", "T4", "V100-16GB", "V100-32GB",
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("Models() names, sorted (-want +got):\n%s", diff)
	}
}

func TestCatalogHandsOutCopies(t *testing.T) {
	m := mustModel(t, "H100-80GB")
	m.Profiles[0].Placements[0].Start = 99
	m.Products[0] = "changed"
	models := Default().Models()
	for i := range models {
		models[i].Profiles = nil
	}
	if diff := cmp.Diff(h100SXM(), mustModel(t, "H100-80GB")); diff != "" {
		t.Errorf("changing a returned model changed the catalog (-want +got):\n%s", diff)
	}
}

func TestCatalogModel(t *testing.T) {
	tests := map[string]struct {
		name   string
		want   string
		wantOK bool
	}{
		"exact name":           {name: "H100-80GB", want: "H100-80GB", wantOK: true},
		"any case":             {name: "h200-141gb", want: "H200-141GB", wantOK: true},
		"a product is no name": {name: "NVIDIA-H200", wantOK: false},
		"empty":                {name: "", wantOK: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m, ok := Default().Model(tc.name)
			if diff := cmp.Diff([]any{tc.want, tc.wantOK}, []any{m.Name, ok}); diff != "" {
				t.Errorf("Model(%q) (-want +got):\n%s", tc.name, diff)
			}
		})
	}
}

func TestCatalogByProduct(t *testing.T) {
	tests := map[string]struct {
		product string
		want    string
		wantOK  bool
	}{
		"GFD label":                       {product: "NVIDIA-H100-80GB-HBM3", want: "H100-80GB", wantOK: true},
		"NVML name":                       {product: "NVIDIA H100 80GB HBM3", want: "H100-80GB", wantOK: true},
		"mixed case and separators":       {product: "nvidia h100-80gb HBM3", want: "H100-80GB", wantOK: true},
		"doubled separators":              {product: " NVIDIA  H200 ", want: "H200-141GB", wantOK: true},
		"PCIe H100 is its own model":      {product: "NVIDIA-H100-PCIe", want: "H100-PCIE-80GB", wantOK: true},
		"H100 NVL":                        {product: "NVIDIA H100 NVL", want: "H100-94GB", wantOK: true},
		"A100 80GB PCIe":                  {product: "NVIDIA-A100-80GB-PCIe", want: "A100-80GB", wantOK: true},
		"A100 40GB from an old driver":    {product: "A100-SXM4-40GB", want: "A100-40GB", wantOK: true},
		"T4":                              {product: "Tesla-T4", want: "T4", wantOK: true},
		"MIG single strategy":             {product: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", want: "A100-40GB", wantOK: true},
		"MIG single, media extension":     {product: "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb.me", want: "H100-80GB", wantOK: true},
		"NVML MIG device name":            {product: "NVIDIA H200 MIG 1g.18gb", want: "H200-141GB", wantOK: true},
		"MIG suffix on an unknown base":   {product: "NVIDIA-B200-MIG-1g.23gb", wantOK: false},
		"unknown product":                 {product: "NVIDIA-GeForce-RTX-4090", wantOK: false},
		"a prefix of a product is not it": {product: "NVIDIA-H100", wantOK: false},
		"empty":                           {product: "", wantOK: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m, ok := Default().ByProduct(tc.product)
			if diff := cmp.Diff([]any{tc.want, tc.wantOK}, []any{m.Name, ok}); diff != "" {
				t.Errorf("ByProduct(%q) (-want +got):\n%s", tc.product, diff)
			}
		})
	}
}

func TestSplitMIGProduct(t *testing.T) {
	tests := map[string]struct {
		product, base, profile string
		ok                     bool
	}{
		"GFD single strategy": {product: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", base: "NVIDIA-A100-SXM4-40GB", profile: "1g.5gb", ok: true},
		"NVML device name":    {product: "NVIDIA H100 80GB HBM3 MIG 3g.40gb", base: "NVIDIA H100 80GB HBM3", profile: "3g.40gb", ok: true},
		"media extension":     {product: "NVIDIA-H200-MIG-1g.18gb.me", base: "NVIDIA-H200", profile: "1g.18gb+me", ok: true},
		"lower case mig":      {product: "nvidia-a30-mig-2g.12gb", base: "nvidia-a30", profile: "2g.12gb", ok: true},
		"no MIG suffix":       {product: "NVIDIA-H100-80GB-HBM3"},
		"MIG not a profile":   {product: "NVIDIA-A100-MIG-enabled"},
		"no base":             {product: "MIG-1g.5gb"},
		"empty":               {product: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			base, profile, ok := SplitMIGProduct(tc.product)
			want := []any{tc.base, tc.profile, tc.ok}
			if diff := cmp.Diff(want, []any{base, profile, ok}); diff != "" {
				t.Errorf("SplitMIGProduct(%q) (-want +got):\n%s", tc.product, diff)
			}
		})
	}
}

func TestNormalizeProfile(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"plain stays":                 {in: "1g.10gb", want: "1g.10gb"},
		"plus stays":                  {in: "1g.10gb+me", want: "1g.10gb+me"},
		"resource spelling":           {in: "1g.10gb.me", want: "1g.10gb+me"},
		"upper case and space":        {in: " 2G.12GB.ME ", want: "2g.12gb+me"},
		"only the trailing .me moves": {in: "7g.80gb", want: "7g.80gb"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, NormalizeProfile(tc.in)); diff != "" {
				t.Errorf("NormalizeProfile(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestModelProfile(t *testing.T) {
	m := mustModel(t, "H100-80GB")
	for _, name := range []string{"1g.10gb+me", "1g.10gb.me", "1G.10GB+ME"} {
		p, ok := m.Profile(name)
		if !ok || p.Name != "1g.10gb+me" || p.ID != 20 {
			t.Errorf("Profile(%q) = %q (id %d), %v; want 1g.10gb+me (id 20)", name, p.Name, p.ID, ok)
		}
	}
	if p, ok := m.Profile("1g.5gb"); ok {
		t.Errorf("Profile(1g.5gb) on an H100 = %q, want none", p.Name)
	}
	if !m.MIG() || mustModel(t, "T4").MIG() {
		t.Error("MIG() should be true for H100-80GB and false for T4")
	}
}

func TestBuiltinMIGModelsAreConsistent(t *testing.T) {
	for _, m := range Default().Models() {
		if !m.MIG() {
			continue
		}
		full := m.Profiles[len(m.Profiles)-1]
		if full.MemorySlices != m.MemorySlices || full.ComputeSlices != m.ComputeSlices || full.SMs > m.SMs {
			t.Errorf("%s: largest profile %s (%d mem, %d compute slices, %d SMs) is not the whole GPU (%d, %d, %d)",
				m.Name, full.Name, full.MemorySlices, full.ComputeSlices, full.SMs, m.MemorySlices, m.ComputeSlices, m.SMs)
		}
		for _, p := range m.Profiles {
			if strings.Contains(p.Name, "+") && p.MaxInstances != 1 {
				t.Errorf("%s %s: a media-extension profile runs once per GPU, not %d times", m.Name, p.Name, p.MaxInstances)
			}
			if p.MaxInstances > len(p.Placements) {
				t.Errorf("%s %s: %d instances but %d placements", m.Name, p.Name, p.MaxInstances, len(p.Placements))
			}
		}
	}
}

func TestNewCatalogRejects(t *testing.T) {
	valid := func() Model { return h100SXM() }
	tests := map[string]struct {
		models  func() []Model
		message string
	}{
		"duplicate name": {
			models:  func() []Model { a, b := valid(), h200(); b.Name = "h100-80gb"; return []Model{a, b} },
			message: "name already used",
		},
		"duplicate product in another spelling": {
			models: func() []Model {
				a, b := valid(), h200()
				b.Products = []string{"nvidia h100 80gb hbm3"}
				return []Model{a, b}
			},
			message: "already belongs to",
		},
		"placement beyond the memory slices": {
			models:  func() []Model { m := valid(); m.Profiles[0].Placements[6].Start = 8; return []Model{m} },
			message: "placement 8:1 outside",
		},
		"placement of the wrong width": {
			models:  func() []Model { m := valid(); m.Profiles[4].Placements[0].Size = 2; return []Model{m} },
			message: "not 4 slices wide",
		},
		"profiles out of order": {
			models: func() []Model {
				m := valid()
				m.Profiles[0], m.Profiles[6] = m.Profiles[6], m.Profiles[0]
				return []Model{m}
			},
			message: "must come before",
		},
		"no instances": {
			models:  func() []Model { m := valid(); m.Profiles[2].MaxInstances = 0; return []Model{m} },
			message: "maxInstances must be at least 1",
		},
		"profile without memory": {
			models:  func() []Model { m := valid(); m.Profiles[0].MemoryMiB = 0; return []Model{m} },
			message: "memoryMiB 0 outside",
		},
		"model without memory": {
			models:  func() []Model { m := whole("X", 0, 1, "X"); return []Model{m} },
			message: "memoryMiB must be positive",
		},
		"name that is no label value": {
			models:  func() []Model { m := whole("H100 80GB", 1, 1, "X"); return []Model{m} },
			message: "not a valid Kubernetes label value",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := NewCatalog(tc.models()...)
			if err == nil || !strings.Contains(err.Error(), tc.message) {
				t.Errorf("NewCatalog error = %v, want one containing %q", err, tc.message)
			}
		})
	}
}

func TestNewCatalogKeepsItsOwnCopy(t *testing.T) {
	m := h100SXM()
	c, err := NewCatalog(m)
	if err != nil {
		t.Fatal(err)
	}
	m.Profiles[0].MemoryMiB = 1
	got, _ := c.Model("H100-80GB")
	if !slices.EqualFunc(got.Profiles, h100SXM().Profiles, func(a, b Profile) bool { return a.MemoryMiB == b.MemoryMiB }) {
		t.Error("changing a model after NewCatalog changed the catalog")
	}
}
