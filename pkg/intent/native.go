package intent

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	mib = 1 << 20
	// nativeGPUAccepted is what gpuadmit.io/gpu accepts.
	nativeGPUAccepted = "accepted: an integer number of GPUs from 1 to 256 or a fraction below 1 such as 500m"
	// nativeMemoryAccepted is what gpuadmit.io/gpu-memory accepts.
	nativeMemoryAccepted = "accepted: a byte quantity from 1Mi to 1Ti per GPU, such as 8000Mi or 10Gi"
)

// readNative reads gpuadmit.io/gpu and gpuadmit.io/gpu-memory.
func readNative(c container, es []entry) (Request, field.ErrorList) {
	r := Request{Form: Whole, Count: 1}
	var errs field.ErrorList
	in := byKey(es)
	gpu, hasGPU := in[ResourceNativeGPU]
	mem, hasMem := in[ResourceNativeGPUMemory]
	if hasGPU {
		var es field.ErrorList
		r.Count, r.FractionMilli, es = c.nativeGPU(gpu)
		errs = append(errs, es...)
		if r.FractionMilli > 0 {
			r.Form = Fraction
		}
	}
	if hasMem {
		var es field.ErrorList
		r.MemoryMiB, es = c.nativeMemory(mem)
		errs = append(errs, es...)
		r.Form = Memory
	}
	if hasMem && r.FractionMilli > 0 {
		errs = append(errs, field.Forbidden(mem.path, c.detail(
			"%s with a fraction of a GPU (%s) is contradictory; ask for a fraction or for memory, not both", mem, gpu)))
	}
	return r, errs
}

// nativeGPU reads gpuadmit.io/gpu: N whole GPUs, or one GPU's fraction in thousandths.
func (c container) nativeGPU(e entry) (count, milli int64, errs field.ErrorList) {
	q := e.q
	var msg string
	switch {
	case q.Sign() == 0:
		msg = fmt.Sprintf("%s asks for no GPU; remove the key or ask for at least 1", e)
	case q.Sign() < 0:
		msg = fmt.Sprintf("%s is negative; %s", e, nativeGPUAccepted)
	case above(q, MaxCount):
		msg = fmt.Sprintf("%s is above %d GPUs; %s", e, MaxCount, nativeGPUAccepted)
	case isInteger(q):
		return q.Value(), 0, nil
	case q.Cmp(*resource.NewQuantity(1, resource.DecimalSI)) < 0:
		return 1, q.MilliValue(), nil
	default:
		msg = fmt.Sprintf("%s asks for a fraction and a whole GPU in one container; %s", e, nativeGPUAccepted)
	}
	return 0, 0, field.ErrorList{field.Invalid(e.path, FormatQuantity(q), c.detail("%s", msg))}
}

// nativeMemory reads gpuadmit.io/gpu-memory, a byte quantity, as MiB rounded up.
func (c container) nativeMemory(e entry) (int64, field.ErrorList) {
	q := e.q
	var msg string
	switch {
	case q.Sign() == 0:
		msg = fmt.Sprintf("%s asks for no GPU memory; remove the key or ask for at least 1Mi", e)
	case q.Sign() < 0:
		msg = fmt.Sprintf("%s is negative; %s", e, nativeMemoryAccepted)
	case above(q, MaxMemoryMiB*mib):
		msg = fmt.Sprintf("%s is above 1Ti per GPU; %s", e, nativeMemoryAccepted)
	case q.Value() < mib:
		msg = fmt.Sprintf("%s is a byte quantity and %s; %s", e.key, belowMi(q), nativeMemoryAccepted)
	default:
		return (q.Value() + mib - 1) / mib, nil
	}
	return 0, field.ErrorList{field.Invalid(e.path, FormatQuantity(q), c.detail("%s", msg))}
}

// belowMi says that q is below 1Mi, and for a bare integer proposes the MiB
// quantity its author most likely meant.
func belowMi(q resource.Quantity) string {
	if v, ok := q.AsInt64(); ok && q.Format == resource.DecimalSI {
		return fmt.Sprintf("%d is %d bytes, below 1Mi; write %dMi for %d MiB", v, v, v, v)
	}
	return FormatQuantity(q) + " is below 1Mi"
}
