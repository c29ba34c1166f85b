package intent

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// readReplicas reads nvidia.com/gpu.shared: N, which NVIDIA's device plugin
// advertises for time-sliced GPUs when it renames them: N replicas, read as
// N whole GPUs that only a time-sliced pool serves (onReplicas).
func readReplicas(c container, es []entry) (Request, field.ErrorList) {
	n, errs := c.integer(es[0])
	return Request{Form: Whole, Count: n}, errs
}

// instead says, for each backend a hint may name, what asks for it in place
// of nvidia.com/gpu.shared.
var instead = map[Backend]string{
	BackendMIG:    ResourceMIGPrefix + "<profile>: N for MIG slices",
	BackendShared: string(ResourceShareMemory) + ": N (GiB) for a memory share",
	BackendWhole:  string(ResourceNVIDIAGPU) + ": N for whole GPUs",
}

// onReplicas sends the pod to time-sliced GPUs for a container that asks
// for nvidia.com/gpu.shared: a pod's GPU containers share one pool, so the
// backend is the pod's. A backend that a hint (gpuadmit.io/backend, or a
// foreign vgpu-mode: mig) already chose otherwise contradicts it.
func (c container) onReplicas(p *Pod, ann map[string]string) field.ErrorList {
	switch p.Backend {
	case BackendAny:
		p.Backend = BackendTimeSliced
		return nil
	case BackendTimeSliced:
		return nil
	}
	es, _ := c.entries()
	e := es[0]
	for _, x := range es {
		if x.key == ResourceNVIDIAReplica {
			e = x
		}
	}
	return field.ErrorList{field.Invalid(e.path, FormatQuantity(e.q), c.detail(
		"%s asks for time-sliced replicas, but %s; accepted: %s with %s unset or %q, or %s",
		ResourceNVIDIAReplica, backendSource(ann, p.Backend), ResourceNVIDIAReplica, AnnotationBackend,
		BackendTimeSliced, instead[p.Backend]))}
}

// backendSource names the hint that chose backend: gpuadmit.io/backend, else
// the foreign vgpu-mode that asks for MIG.
func backendSource(ann map[string]string, backend Backend) string {
	if _, ok := ann[AnnotationBackend]; ok {
		return fmt.Sprintf("%s is %q", AnnotationBackend, backend)
	}
	for _, key := range []string{AnnotationHAMiMode, AnnotationVolcanoMode} {
		if v, ok := ann[key]; ok && migOnly(v) {
			return fmt.Sprintf("%s is %q, which asks for MIG", key, v)
		}
	}
	return fmt.Sprintf("the pod's backend is %q", backend)
}

// migOnly reports whether a vgpu-mode value names mig and no other mode, as
// readModes reads it.
func migOnly(v string) bool {
	for _, m := range strings.Split(v, ",") {
		if strings.TrimSpace(m) != "mig" {
			return false
		}
	}
	return true
}
