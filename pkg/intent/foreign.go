package intent

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Pod annotations of other GPU schedulers (HAMi, Volcano's vGPU plugin) that
// gpuadmit reads: each is either translated into a hint or reported as a
// warning that names it; none is ignored.
const (
	// AnnotationHAMiUseType lists GPU types the pod may use, comma-separated ("A100,V100").
	AnnotationHAMiUseType = "nvidia.com/use-gputype"
	// AnnotationHAMiNoUseType lists GPU types the pod must not use.
	AnnotationHAMiNoUseType = "nvidia.com/nouse-gputype"
	// AnnotationHAMiMode is HAMi's allocation mode: mig, hami-core or mps.
	AnnotationHAMiMode = "nvidia.com/vgpu-mode"
	// AnnotationVolcanoMode is Volcano's spelling of AnnotationHAMiMode.
	AnnotationVolcanoMode = "volcano.sh/vgpu-mode"
	// AnnotationHAMiUseUUID pins the pod to GPUs by UUID.
	AnnotationHAMiUseUUID = "nvidia.com/use-gpuuuid"
	// AnnotationHAMiNoUseUUID keeps the pod off GPUs by UUID.
	AnnotationHAMiNoUseUUID = "nvidia.com/nouse-gpuuuid"
	// AnnotationVolcanoUseUUID is Volcano's AnnotationHAMiUseUUID.
	AnnotationVolcanoUseUUID = "volcano.sh/vgpu-use-gpuuuid"
	// AnnotationVolcanoNoUseUUID is Volcano's AnnotationHAMiNoUseUUID.
	AnnotationVolcanoNoUseUUID = "volcano.sh/vgpu-nouse-gpuuuid"
	// AnnotationHAMiGPUPolicy is HAMi's GPU packing policy (binpack, spread).
	AnnotationHAMiGPUPolicy = "hami.io/gpu-scheduler-policy"
	// AnnotationHAMiNodePolicy is HAMi's node packing policy (binpack, spread).
	AnnotationHAMiNodePolicy = "hami.io/node-scheduler-policy"
	// AnnotationHAMiNUMABind asks HAMi for GPUs of one NUMA node.
	AnnotationHAMiNUMABind = "nvidia.com/numa-bind"
	// AnnotationVolcanoPodGroupPolicy asks Volcano to spread a pod group's pods over GPUs.
	AnnotationVolcanoPodGroupPolicy = "volcano.sh/vgpu-podgroup-policy"
)

// modes are the values HAMi and Volcano accept in vgpu-mode.
var modes = []string{"mig", "hami-core", "mps"}

const (
	uuidPin   = "pins GPUs by UUID; gpuadmit places the pod on a pool, not on one GPU, so the pin is not honoured"
	packing   = "is a packing hint of another scheduler; gpuadmit's pool choice and the pod's scheduler decide packing, so it is not honoured"
	numaBind  = "asks for GPUs of one NUMA node; gpuadmit does not place by NUMA node, so it is not honoured"
	typesHelp = "accepted: GPU types separated by commas, such as A100,V100, each matched against the pool's model and product"
)

// unhonoured are the foreign annotations gpuadmit cannot honour, and why.
var unhonoured = map[string]string{
	AnnotationHAMiUseUUID:           uuidPin,
	AnnotationHAMiNoUseUUID:         uuidPin,
	AnnotationVolcanoUseUUID:        uuidPin,
	AnnotationVolcanoNoUseUUID:      uuidPin,
	AnnotationHAMiGPUPolicy:         packing,
	AnnotationHAMiNodePolicy:        packing,
	AnnotationVolcanoPodGroupPolicy: packing,
	AnnotationHAMiNUMABind:          numaBind,
}

// readForeign reads the foreign hints into p: GPU types, the MIG mode, and a
// warning for each annotation that cannot be honoured.
func readForeign(ann map[string]string, p *Pod) field.ErrorList {
	var errs field.ErrorList
	p.UseTypes, errs = readTypes(ann, AnnotationHAMiUseType)
	avoid, errs2 := readTypes(ann, AnnotationHAMiNoUseType)
	p.AvoidTypes = avoid
	errs = append(errs, errs2...)
	errs = append(errs, readModes(ann, p)...)
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range unhonoured {
			if !yield(k) {
				return
			}
		}
	}) {
		if v, ok := ann[k]; ok {
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s=%q %s", annotations.Key(k), v, unhonoured[k]))
		}
	}
	return errs
}

// readTypes reads a comma-separated list of GPU types; nil when unset.
func readTypes(ann map[string]string, key string) ([]string, field.ErrorList) {
	v, ok := ann[key]
	if !ok {
		return nil, nil
	}
	var out []string
	for _, t := range strings.Split(v, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return nil, field.ErrorList{field.Invalid(annotations.Key(key), v, "names no GPU type; "+typesHelp)}
	}
	return out, nil
}

// readModes reads nvidia.com/vgpu-mode and volcano.sh/vgpu-mode. "mig" alone
// narrows the backend to MIG; hami-core and mps have no gpuadmit equivalent
// and are warned about; a mode that contradicts gpuadmit.io/backend is an error.
func readModes(ann map[string]string, p *Pod) field.ErrorList {
	var errs field.ErrorList
	for _, key := range []string{AnnotationHAMiMode, AnnotationVolcanoMode} {
		v, ok := ann[key]
		if !ok {
			continue
		}
		path := annotations.Key(key)
		var mig, other bool
		for _, m := range strings.Split(v, ",") {
			m = strings.TrimSpace(m)
			switch {
			case !slices.Contains(modes, m):
				errs = append(errs, field.NotSupported(path, v, modes))
			case m == "mig":
				mig = true
			default:
				other = true
			}
		}
		switch {
		case mig && !other && p.Backend != BackendAny && p.Backend != BackendMIG:
			errs = append(errs, field.Invalid(path, v, fmt.Sprintf(
				"asks for MIG, but %s is %q; remove one, or set both to MIG", AnnotationBackend, p.Backend)))
		case mig && !other:
			p.Backend = BackendMIG
		case other:
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s=%q: gpuadmit has no HAMi-core or MPS mode; "+
				"the policy chooses a MIG slice, a memory share, time-sliced replicas or whole GPUs (set %s to narrow it)", path, v, AnnotationBackend))
		}
	}
	return errs
}
