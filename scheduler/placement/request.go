package placement

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// item is what a pod takes of one GPU, in the order the node side hands
// GPUs out.
type item struct {
	// shares is a number of units of a device-plugin share resource.
	shares int64
	// memory is the GPU memory, in bytes, a DRA share asks for; 0 (with
	// whole false) asks for the device's default.
	memory int64
	// whole is a whole GPU.
	whole bool
}

// request is what the plugin scores of a pod: its CPU and memory, and what
// it takes of GPUs, either in a device-plugin pool (units of shareResource,
// one item per container) or in a DRA pool (one item per device its
// claims and its extended resources ask).
type request struct {
	milliCPU, memoryMiB int64
	shareResource       corev1.ResourceName
	dra                 bool
	items               []item
	// choices, set instead of items where a DRA request of the pod is a
	// prioritized list (firstAvailable), are every DRA request of the pod
	// in the order the allocator takes them (claims in the pod's order,
	// each claim's requests in order, the extended resources' last), an
	// exact request as a choice of one alternative. What the pod takes of
	// a node is then the node's prediction (see predict). choiceKey
	// spells them, to key kept scores by.
	choices   []choice
	choiceKey string
	// models are the GPU models the pod's DRA requests let it take, as an
	// allocator spec ("A100-40GB|H100-80GB", see allocator.ModelAllowed):
	// "" where they name none (any model), noModel where they exclude
	// every one (see models.go).
	models string
}

// gpu reports whether the pod asks for GPU in a way the plugin scores.
func (r request) gpu() bool { return len(r.items) > 0 || len(r.choices) > 0 }

// claimGetter is the part of the scheduler's ResourceClaim tracker the
// plugin reads.
type claimGetter interface {
	Get(namespace, name string) (*resourceapi.ResourceClaim, error)
}

// shareResources are the device-plugin resources whose units are shares of
// one GPU's memory.
var shareResources = []corev1.ResourceName{allocator.ResourceShare, allocator.ResourceGPUShare}

// readRequest reads what placing pod takes: share units per app container
// (init containers' devices are the kubelet's to reuse, so they are left
// out), whole GPUs of nvidia.com/gpu, and the devices of its
// ResourceClaims of gpuadmit's classes that are not allocated yet. A claim
// the tracker does not have yet is an error, so that the pod is scored
// once it is there.
func readRequest(pod *corev1.Pod, claims claimGetter) (request, error) {
	return read(pod, claims, false)
}

// readAsked reads what pod asked, placed or not: as readRequest, and the
// devices of the claims allocated for it (see claimItems). It is the pod's
// kind in the derived workload, which counts running pods as well as
// pending ones.
func readAsked(pod *corev1.Pod, claims claimGetter) (request, error) {
	return read(pod, claims, true)
}

func read(pod *corev1.Pod, claims claimGetter, asked bool) (request, error) {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	r := request{milliCPU: reqs.Cpu().MilliValue(), memoryMiB: reqs.Memory().Value() >> 20}
	whole := int64(0)
	for _, c := range pod.Spec.Containers {
		for _, res := range shareResources {
			if n := quantity(c.Resources, res); n > 0 {
				r.shareResource = res
				r.items = append(r.items, item{shares: n})
			}
		}
		whole += quantity(c.Resources, allocator.ResourceGPU)
	}
	if len(pod.Spec.ResourceClaims) > 0 || whole > 0 {
		items, choices, models, err := claimItems(pod, claims, asked)
		if err != nil {
			return request{}, err
		}
		r.models = models
		var ext []item
		for range whole {
			ext = append(ext, item{whole: true})
		}
		if choices != nil {
			if len(ext) > 0 {
				choices = append(choices, choice{{items: ext}})
			}
			r.dra, r.items, r.choices, r.choiceKey = true, nil, choices, spellChoices(choices)
			return r, nil
		}
		if items = append(items, ext...); len(items) > 0 {
			r.dra, r.items = true, items
		}
	}
	return r, nil
}

// spellChoices spells cs for a request's key: every field of every
// alternative, strings with their length, so that two lists spell alike
// only when they are alike. It replaces fmt.Sprint, whose reflection took
// about a sixth of the placement time per cycle in the 1,213-node replay.
func spellChoices(cs []choice) string {
	b := make([]byte, 0, 32*len(cs))
	str := func(x string) {
		b = strconv.AppendInt(b, int64(len(x)), 10)
		b = append(b, ':')
		b = append(b, x...)
	}
	for _, c := range cs {
		b = append(b, '[')
		for _, a := range c {
			str(a.model)
			str(a.migClass)
			b = strconv.AppendInt(b, a.migs, 10)
			for _, it := range a.items {
				b = append(b, ' ')
				b = strconv.AppendInt(b, it.shares, 10)
				b = append(b, ',')
				b = strconv.AppendInt(b, it.memory, 10)
				b = strconv.AppendBool(b, it.whole)
			}
			b = append(b, ';')
		}
		b = append(b, ']')
	}
	return string(b)
}

// quantity is the request of res, or its limit where no request is set
// (the API server copies one to the other for extended resources).
func quantity(rr corev1.ResourceRequirements, res corev1.ResourceName) int64 {
	if q, ok := rr.Requests[res]; ok {
		return q.Value()
	}
	q := rr.Limits[res]
	return q.Value()
}

// claimItems lists the devices of gpuadmit's share and whole-GPU classes
// that the pod's unallocated claims ask for; with asked, also those of the
// allocated claims reserved first for this pod, the claims its own
// placement allocated (a claim shared with a pod placed before is reserved
// first for that pod, and counts once). Other classes (MIG instances,
// other drivers) and requests the plugin cannot size (all devices) are
// left out. Where an unallocated claim has a prioritized list the plugin
// can size (see listChoice), and not asked, it returns choices instead of
// items: every request sized, in order (see request.choices). With asked
// a prioritized list counts as the first of its alternatives that takes
// shares or whole GPUs, the one the pod asks for first: which alternative
// an allocated claim took is not a kind the workload counts. models is what
// the requests read accept: each request the models its model selectors
// name (requestModels), the pod what every request accepts.
func claimItems(pod *corev1.Pod, claims claimGetter, asked bool) (items []item, choices []choice, models string, err error) {
	list := false
	for _, pc := range pod.Spec.ResourceClaims {
		name := claimName(pod, pc)
		if name == "" {
			return nil, nil, "", fmt.Errorf("pod %s/%s: claim %s not created yet", pod.Namespace, pod.Name, pc.Name)
		}
		if claims == nil {
			return nil, nil, "", fmt.Errorf("pod %s/%s: no DRA claim tracker", pod.Namespace, pod.Name)
		}
		claim, err := claims.Get(pod.Namespace, name)
		if err != nil {
			return nil, nil, "", fmt.Errorf("pod %s/%s: claim %s: %w", pod.Namespace, pod.Name, name, err)
		}
		if claim.Status.Allocation != nil && !(asked && reservedFirstFor(claim, pod)) {
			continue // placed already, or shared with a pod placed before: takes nothing new
		}
		for _, req := range claim.Spec.Devices.Requests {
			its := requestItems(req)
			if len(its) > 0 || len(req.FirstAvailable) > 0 {
				models = intersectModels(models, requestModels(req))
			}
			items = append(items, its...)
			if len(req.FirstAvailable) == 0 {
				if len(its) > 0 {
					choices = append(choices, choice{{items: its}})
				}
				continue
			}
			c, ok := listChoice(req.FirstAvailable)
			switch {
			case ok && asked:
				items = append(items, c.first()...)
			case ok:
				choices, list = append(choices, c), true
			}
		}
	}
	if !list {
		choices = nil
	}
	return items, choices, models, nil
}

// reservedFirstFor reports whether pod is the first consumer claim is
// reserved for.
func reservedFirstFor(claim *resourceapi.ResourceClaim, pod *corev1.Pod) bool {
	r := claim.Status.ReservedFor
	return len(r) > 0 && r[0].UID == pod.UID && r[0].Resource == "pods" && r[0].APIGroup == ""
}

func requestItems(req resourceapi.DeviceRequest) []item {
	ex := req.Exactly
	if ex == nil || (ex.AllocationMode != "" && ex.AllocationMode != resourceapi.DeviceAllocationModeExactCount) {
		return nil
	}
	it := item{}
	switch ex.DeviceClassName {
	case allocator.DRAClassGPU:
		it.whole = true
	case allocator.DRAClassShare:
		if ex.Capacity != nil {
			if q, ok := ex.Capacity.Requests[allocator.DRACapacityMemory]; ok {
				it.memory = q.Value()
			}
		}
	default:
		return nil
	}
	n := max(ex.Count, 1)
	out := make([]item, n)
	for i := range out {
		out[i] = it
	}
	return out
}

// claimName is the name of the ResourceClaim behind a pod's claim: its own,
// or the one generated from its template, once the resource-claim
// controller recorded it in the pod's status.
func claimName(pod *corev1.Pod, pc corev1.PodResourceClaim) string {
	if pc.ResourceClaimName != nil {
		return *pc.ResourceClaimName
	}
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.Name == pc.Name && s.ResourceClaimName != nil {
			return *s.ResourceClaimName
		}
	}
	return ""
}
