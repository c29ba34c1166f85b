package intent

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// container is one entry of spec.initContainers or spec.containers, with the
// path its errors are reported under.
type container struct {
	name  string
	kind  Kind
	index int
	path  *field.Path
	res   corev1.ResourceRequirements
}

// entry is one GPU resource of a container: the value read and where it was read.
type entry struct {
	key  corev1.ResourceName
	q    resource.Quantity
	path *field.Path
}

// String renders the entry as "key=value" for Request.Source and messages.
func (e entry) String() string { return string(e.key) + "=" + FormatQuantity(e.q) }

// containers lists a pod's containers in the order Kubernetes starts them:
// init containers (and sidecars), then app containers.
func containers(spec *corev1.PodSpec) []container {
	spec0 := field.NewPath("spec")
	out := make([]container, 0, len(spec.InitContainers)+len(spec.Containers))
	for i, c := range spec.InitContainers {
		kind := Init
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			kind = Sidecar
		}
		out = append(out, container{c.Name, kind, i, spec0.Child("initContainers").Index(i), c.Resources})
	}
	for i, c := range spec.Containers {
		out = append(out, container{c.Name, App, i, spec0.Child("containers").Index(i), c.Resources})
	}
	return out
}

// detail prefixes a message with the container it is about.
func (c container) detail(format string, args ...any) string {
	return fmt.Sprintf("container %q: ", c.name) + fmt.Sprintf(format, args...)
}

// gpuKeys returns the container's GPU resource names, from limits and
// requests, sorted so that errors and sources come out in a stable order.
func (c container) gpuKeys() []corev1.ResourceName {
	var keys []corev1.ResourceName
	for _, list := range []corev1.ResourceList{c.res.Limits, c.res.Requests} {
		for k := range list {
			if IsGPUResource(k) && !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys
}

// entries reads each GPU key from limits, or from requests when limits lack
// it; a key whose request and limit differ is an error.
func (c container) entries() ([]entry, field.ErrorList) {
	var out []entry
	var errs field.ErrorList
	res := c.path.Child("resources")
	for _, key := range c.gpuKeys() {
		lim, inLim := c.res.Limits[key]
		req, inReq := c.res.Requests[key]
		switch {
		case inLim && inReq && lim.Cmp(req) != 0:
			errs = append(errs, field.Invalid(res.Child("requests").Key(string(key)), FormatQuantity(req), c.detail(
				"requests and limits of %s differ (%s vs %s); GPU resources need requests equal to limits",
				key, FormatQuantity(req), FormatQuantity(lim))))
		case inLim:
			out = append(out, entry{key, lim, res.Child("limits").Key(string(key))})
		default:
			out = append(out, entry{key, req, res.Child("requests").Key(string(key))})
		}
	}
	return out, errs
}
