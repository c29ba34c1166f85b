package allocator

import "strings"

// migSeparator joins a base product and a MIG profile in the product label GPU
// Feature Discovery sets under the single MIG strategy
// ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"), once spaces are read as dashes.
const migSeparator = "-mig-"

// NormalizeProfile returns the canonical spelling of a MIG profile name:
// lower case, without surrounding space, and with the media-extension suffix
// written "+me". Kubernetes resource names cannot hold a "+", so the device
// plugin advertises "1g.10gb+me" as "mig-1g.10gb.me"; both spellings
// normalize to "1g.10gb+me". Only a trailing ".me" is rewritten; the dot in
// "1g.10gb" stays.
func NormalizeProfile(name string) string {
	s := strings.ToLower(strings.TrimSpace(name))
	if base, ok := strings.CutSuffix(s, ".me"); ok {
		return base + "+me"
	}
	return s
}

// SplitMIGProduct splits a product name that names a MIG profile, as GPU
// Feature Discovery's single strategy writes it ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb")
// or as NVML names a MIG device ("NVIDIA A100-SXM4-40GB MIG 1g.5gb"), into the
// base product and the normalized profile. ok is false when product carries
// no MIG profile.
func SplitMIGProduct(product string) (base, profile string, ok bool) {
	dashed := strings.ToLower(strings.ReplaceAll(product, " ", "-"))
	i := strings.LastIndex(dashed, migSeparator)
	if i <= 0 {
		return "", "", false
	}
	profile = NormalizeProfile(product[i+len(migSeparator):])
	if !isProfileName(profile) {
		return "", "", false
	}
	return strings.TrimSpace(product[:i]), profile, true
}

// isProfileName reports whether s, already normalized, reads as a GPU
// instance profile: "<n>g.<n>gb" with an optional "+<extension>".
func isProfileName(s string) bool {
	s, _, _ = strings.Cut(s, "+")
	compute, memory, ok := strings.Cut(s, "g.")
	if !ok || !allDigits(compute) {
		return false
	}
	size, ok := strings.CutSuffix(memory, "gb")
	return ok && allDigits(size)
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// productKey is the form products are compared in: lower case, with runs of
// spaces and dashes read as one dash, so GPU Feature Discovery's
// "NVIDIA-H100-80GB-HBM3" and NVML's "NVIDIA H100 80GB HBM3" are the same.
func productKey(product string) string {
	fields := strings.FieldsFunc(product, func(r rune) bool { return r == ' ' || r == '-' })
	return strings.ToLower(strings.Join(fields, "-"))
}
