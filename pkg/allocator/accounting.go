package allocator

import "strings"

// Accounting resources name GPU memory in MiB for ResourceQuota, so a
// namespace quota caps GPU memory whatever its form: the webhook requests them, the agent advertises them. They live
// here, the one package both sides import.
const (
	// ResourceMemoryMiB counts GPU memory in MiB, whatever its form.
	ResourceMemoryMiB = "gpuadmit.io/gpu-memory-mib"

	// QuotaOnlyMiB is the capacity a node of gpuadmit's DRA driver
	// advertises under ResourceMemoryMiB: quota-only, it never refuses a
	// pod. A pod with DRA alternatives requests ResourceMemoryMiB at its
	// largest alternative while the scheduler may give it as little as one
	// share step, so counted against the GPUs' real memory the charges of
	// a node's pods would refuse pods whose devices are free. The scheduler
	// sums the requests of a node's pods; there are at most its pod
	// capacity of them (the kubelet's maxPods, 110 by default), each
	// charged at most 8 GPUs of the largest memory (under 2^18 MiB each),
	// which is 2^21 MiB a pod: 2^40 MiB holds 2^19 such pods on one node,
	// and 5,000 nodes of it sum to about 2^52, far from int64's limit. The
	// devices themselves are what the scheduler fits; the per-model
	// resources keep their real MiB.
	QuotaOnlyMiB int64 = 1 << 40

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
