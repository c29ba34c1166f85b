package allocator

import (
	"errors"
	"fmt"
	"strings"
)

// validateModels checks models as NewCatalog promises and reports every
// problem it finds, each naming its model and profile.
func validateModels(models []Model) error {
	var errs []error
	names := map[string]string{}    // lower-cased name → name
	products := map[string]string{} // productKey → model name
	for _, m := range models {
		errs = append(errs, validateModel(m)...)
		if prev, ok := names[strings.ToLower(m.Name)]; ok {
			errs = append(errs, fmt.Errorf("model %q: name already used by %q", m.Name, prev))
		}
		names[strings.ToLower(m.Name)] = m.Name
		errs = append(errs, claimProducts(products, m)...)
	}
	return errors.Join(errs...)
}

// claimProducts records m's products in owners and reports any product that
// another model already claimed. A model may list one product in several
// spellings.
func claimProducts(owners map[string]string, m Model) []error {
	var errs []error
	for _, p := range m.Products {
		key := productKey(p)
		if key == "" {
			errs = append(errs, fmt.Errorf("model %q: empty product name", m.Name))
			continue
		}
		if owner, ok := owners[key]; ok && owner != m.Name {
			errs = append(errs, fmt.Errorf("model %q: product %q already belongs to %q", m.Name, p, owner))
		}
		owners[key] = m.Name
	}
	return errs
}

func validateModel(m Model) []error {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("model %q: %s", m.Name, fmt.Sprintf(format, args...)))
	}
	if !validLabelValue(m.Name) {
		fail("name is not a valid Kubernetes label value")
	}
	if m.MemoryMiB <= 0 {
		fail("memoryMiB must be positive, got %d", m.MemoryMiB)
	}
	if m.MIG() && (m.MemorySlices <= 0 || m.ComputeSlices <= 0) {
		fail("MIG profiles need positive memorySlices and computeSlices, got %d and %d", m.MemorySlices, m.ComputeSlices)
	}
	seen := map[string]bool{}
	for i, p := range m.Profiles {
		if seen[NormalizeProfile(p.Name)] {
			fail("profile %q listed twice", p.Name)
		}
		seen[NormalizeProfile(p.Name)] = true
		if i > 0 && profileBefore(p, m.Profiles[i-1]) {
			fail("profile %q must come before %q (sort by memoryMiB, then computeSlices)", p.Name, m.Profiles[i-1].Name)
		}
		errs = append(errs, validateProfile(m, p)...)
	}
	return errs
}

// profileBefore reports whether a sorts strictly before b in a model's list.
func profileBefore(a, b Profile) bool {
	if a.MemoryMiB != b.MemoryMiB {
		return a.MemoryMiB < b.MemoryMiB
	}
	return a.ComputeSlices < b.ComputeSlices
}

func validateProfile(m Model, p Profile) []error {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("model %q profile %q: %s", m.Name, p.Name, fmt.Sprintf(format, args...)))
	}
	if !isProfileName(NormalizeProfile(p.Name)) {
		fail("name is not of the form <n>g.<n>gb[+ext]")
	}
	if p.MemoryMiB <= 0 || p.MemoryMiB > m.MemoryMiB {
		fail("memoryMiB %d outside 1..%d", p.MemoryMiB, m.MemoryMiB)
	}
	if p.MaxInstances < 1 {
		fail("maxInstances must be at least 1, got %d", p.MaxInstances)
	}
	if p.ComputeSlices < 1 || p.ComputeSlices > m.ComputeSlices {
		fail("computeSlices %d outside 1..%d", p.ComputeSlices, m.ComputeSlices)
	}
	if p.MemorySlices < 1 || p.MemorySlices > m.MemorySlices {
		fail("memorySlices %d outside 1..%d", p.MemorySlices, m.MemorySlices)
	}
	if len(p.Placements) == 0 {
		fail("no placements")
	}
	for _, pl := range p.Placements {
		if pl.Start < 0 || pl.Size != p.MemorySlices || pl.Start+pl.Size > m.MemorySlices {
			fail("placement %d:%d outside the %d memory slices or not %d slices wide", pl.Start, pl.Size, m.MemorySlices, p.MemorySlices)
		}
	}
	return errs
}

// validLabelValue reports whether s may be a Kubernetes label value: at most
// 63 characters of [A-Za-z0-9_.-], beginning and ending with an alphanumeric.
// An empty name is refused although the API server would take it.
func validLabelValue(s string) bool {
	if s == "" || len(s) > 63 || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
