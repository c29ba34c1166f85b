package allocator

import "strings"

// Accounting resources name GPU memory in MiB for ResourceQuota, so a
// namespace quota caps GPU memory whatever its form: the webhook requests them, the agent advertises them. They live
// here, the one package both sides import.
const (
	// ResourceMemoryMiB counts GPU memory in MiB, whatever its form.
	ResourceMemoryMiB = "gpuadmit.io/gpu-memory-mib"

	accountingPrefix = "gpuadmit.io/"
	accountingSuffix = "-mib"
	maxNameLen       = 63 // the name part of a qualified resource name
)

// AccountingResource is a model's accounting resource, "gpuadmit.io/h100-80gb-mib":
// lower case, any byte outside [a-z0-9.-] written "-", cut and trimmed of "-"
// and "." so the name part stays a valid qualified name whatever NVML or GFD
// calls an unknown GPU.
func AccountingResource(model string) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(model))
	if len(name) > maxNameLen-len(accountingSuffix) {
		name = name[:maxNameLen-len(accountingSuffix)]
	}
	name = strings.Trim(name, "-.")
	if name == "" {
		name = "unknown"
	}
	return accountingPrefix + name + accountingSuffix
}

// IsAccountingResource reports whether name is an accounting resource.
func IsAccountingResource(name string) bool {
	return strings.HasPrefix(name, accountingPrefix) && strings.HasSuffix(name, accountingSuffix)
}
