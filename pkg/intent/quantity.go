package intent

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// unit says what an integer GPU resource counts and which values it accepts.
type unit struct {
	means    string // completes "<key> ...", e.g. "counts MiB of memory per GPU"
	min, max int64
	bytes    int64 // bytes in one unit when the key counts MiB or GiB, else 0
}

// unitOf returns the unit of an integer-valued GPU resource.
func unitOf(key corev1.ResourceName) unit {
	switch key {
	case ResourceNVIDIAGPU, ResourceVolcanoNumber, ResourceVolcanoShareNumber:
		return unit{"counts GPUs", 1, MaxCount, 0}
	case ResourceHAMiMemory, ResourceVolcanoMemory:
		return unit{"counts MiB of memory per GPU", 1, MaxMemoryMiB, 1 << 20}
	case ResourceVolcanoShareMemory:
		return unit{"counts MiB of one GPU's memory", 1, MaxMemoryMiB, 1 << 20}
	case ResourceHAMiMemoryPercentage, ResourceVolcanoMemoryPercentage:
		return unit{"is a percentage of each GPU's memory", 1, MaxPercent, 0}
	case ResourceHAMiPriority:
		return unit{"is HAMi's task priority, 0 (high) or 1 (low)", 0, 1, 0}
	case ResourceHAMiCores, ResourceVolcanoCores:
		return unit{"is a percentage of each GPU's compute", 0, MaxPercent, 0}
	case ResourceShareMemory, ResourceGPUShareMemory:
		return unit{"counts GiB of GPU memory", 1, MaxMemoryMiB >> 10, 1 << 30}
	}
	if IsDeviceClassResource(key) {
		return unit{"counts devices of the DeviceClass", 1, MaxCount, 0}
	}
	return unit{"counts MIG slices", 1, MaxCount, 0}
}

// integer reads e as an integer within the limits of its key.
func (c container) integer(e entry) (int64, field.ErrorList) {
	if msg := unitOf(e.key).check(e); msg != "" {
		return 0, field.ErrorList{field.Invalid(e.path, FormatQuantity(e.q), c.detail("%s", msg))}
	}
	return e.q.Value(), nil
}

// check returns what is wrong with e's value, or "" when it is accepted.
func (u unit) check(e entry) string {
	accepted := fmt.Sprintf("accepted: an integer from %d to %d", u.min, u.max)
	switch {
	case e.q.Sign() == 0 && u.min > 0:
		return fmt.Sprintf("%s asks for no GPU; remove the key or ask for at least 1", e)
	case e.q.Sign() < 0:
		return fmt.Sprintf("%s is negative; %s %s; %s", e, e.key, u.means, accepted)
	case above(e.q, u.max):
		return fmt.Sprintf("%s is above %d; %s %s%s; %s", e, u.max, e.key, u.means, u.hint(e.q), accepted)
	case !isInteger(e.q):
		return fmt.Sprintf("%s is not an integer; %s %s; %s", e, e.key, u.means, accepted)
	}
	return ""
}

// hint suggests the number meant when a byte quantity was written where
// MiB or GiB are counted (nvidia.com/gpumem: 3Gi).
func (u unit) hint(q resource.Quantity) string {
	if u.bytes == 0 || above(q, 1<<50) || q.Value()%u.bytes != 0 {
		return ""
	}
	return fmt.Sprintf(", so %s (%d bytes) would be %d", FormatQuantity(q), q.Value(), q.Value()/u.bytes)
}

// above reports whether q is greater than n.
func above(q resource.Quantity, n int64) bool {
	return q.Cmp(*resource.NewQuantity(n, resource.DecimalSI)) > 0
}

// isInteger reports whether q, known to fit in an int64, is a whole number.
func isInteger(q resource.Quantity) bool {
	return q.Cmp(*resource.NewQuantity(q.Value(), resource.DecimalSI)) == 0
}

// show renders q for messages and sources: small decimal integers as plain
// numbers ("3000", not the canonical "3k"), everything else canonically.
// FormatQuantity prints a quantity as a person wrote it: plain integers stay
// plain ("3000", not Kubernetes' canonical "3k"); anything else is canonical.
func FormatQuantity(q resource.Quantity) string {
	if v, ok := q.AsInt64(); ok && q.Format == resource.DecimalSI && v > -1e9 && v < 1e9 {
		return strconv.FormatInt(v, 10)
	}
	return q.String()
}
