package intent

import (
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// reader turns one dialect's entries of a container into a Request's amount.
type reader func(c container, es []entry) (Request, field.ErrorList)

// readers holds the reader of every resource-based dialect.
var readers = map[Dialect]reader{
	Native:       readNative,
	NVIDIA:       hamiKeys.read,
	NVIDIAShared: readReplicas,
	HAMi:         hamiKeys.read,
	Volcano:      volcanoKeys.read,
	VolcanoShare: readVolcanoShare,
	Share:        readGiB,
	GPUShare:     readGiB,
	MIG:          readMIG,
	DeviceClass:  readDeviceClass,
}

// vgpuKeys names the resources of a dialect built from a GPU count, memory
// per GPU (MiB) or a share of it (percent), and a share of compute.
// priority, where the dialect has one, is a task priority gpuadmit reads and drops.
type vgpuKeys struct{ count, memory, percent, cores, priority corev1.ResourceName }

var (
	hamiKeys    = vgpuKeys{ResourceNVIDIAGPU, ResourceHAMiMemory, ResourceHAMiMemoryPercentage, ResourceHAMiCores, ResourceHAMiPriority}
	volcanoKeys = vgpuKeys{ResourceVolcanoNumber, ResourceVolcanoMemory, ResourceVolcanoMemoryPercentage, ResourceVolcanoCores, ""}
)

// read reads a count (default 1) with memory, a memory share or neither.
func (k vgpuKeys) read(c container, es []entry) (Request, field.ErrorList) {
	r := Request{Form: Whole, Count: 1}
	in := byKey(es)
	var errs, e1, e2, e3 field.ErrorList
	if e, ok := in[k.count]; ok {
		r.Count, e1 = c.integer(e)
	}
	mem, hasMem := in[k.memory]
	pct, hasPct := in[k.percent]
	switch {
	case hasMem && hasPct:
		errs = append(errs, field.Forbidden(pct.path, c.detail(
			"%s and %s together are contradictory; ask for MiB or for a percentage of memory, not both", mem, pct)))
	case hasMem:
		r.Form = Memory
		r.MemoryMiB, e2 = c.integer(mem)
	case hasPct:
		r.Form = Fraction
		r.FractionMilli, e2 = c.integer(pct)
		r.FractionMilli *= 1000 / MaxPercent
	}
	if e, ok := in[k.cores]; ok {
		r.CoresPercent, e3 = c.integer(e)
	}
	errs = append(append(append(errs, e1...), e2...), e3...)
	if e, ok := in[k.priority]; ok {
		errs = append(errs, c.priority(e, len(es) == 1, &r)...)
	}
	return r, errs
}

// priority reads HAMi's nvidia.com/priority and drops it with a warning: the
// pod's priority is its PriorityClass. Alone, it asks for no GPU.
func (c container) priority(e entry, alone bool, r *Request) field.ErrorList {
	if alone {
		return field.ErrorList{field.Forbidden(e.path, c.detail(
			"%s is HAMi's task priority of a GPU request, and the container asks for no GPU; remove it, "+
				"or ask for GPU (such as nvidia.com/gpu: 1) and set gpuadmit.io/class for a PriorityClass", e))}
	}
	if _, errs := c.integer(e); len(errs) > 0 {
		return errs
	}
	r.Warnings = append(r.Warnings, c.detail("%s=%s is HAMi's task priority; gpuadmit drops it: "+
		"the pod's PriorityClass (from %s) sets its priority", e.path, FormatQuantity(e.q), AnnotationClass))
	return nil
}

// readVolcanoShare reads Volcano's older share plugin: volcano.sh/gpu-memory,
// MiB of one GPU's memory, or volcano.sh/gpu-number, whole GPUs; not both.
func readVolcanoShare(c container, es []entry) (Request, field.ErrorList) {
	if len(es) > 1 {
		return Request{}, field.ErrorList{field.Forbidden(es[1].path, c.detail(
			"%s and %s together are contradictory; ask for MiB of one GPU (%s) or for whole GPUs (%s), not both",
			es[0], es[1], ResourceVolcanoShareMemory, ResourceVolcanoShareNumber))}
	}
	n, errs := c.integer(es[0])
	if es[0].key == ResourceVolcanoShareNumber {
		return Request{Form: Whole, Count: n}, errs
	}
	return Request{Form: Memory, Count: 1, MemoryMiB: n}, errs
}

// readGiB reads a memory share counted in GiB (gpuadmit.io/gpu-mem, aliyun.com/gpu-mem).
func readGiB(c container, es []entry) (Request, field.ErrorList) {
	gib, errs := c.integer(es[0])
	return Request{Form: Memory, Count: 1, MemoryMiB: gib << 10}, errs
}

// migProfile matches a MIG profile as a resource name spells it; ".me" is the
// resource-name spelling of "+me".
var migProfile = regexp.MustCompile(`^([1-9][0-9]?)g\.([1-9][0-9]{0,3})gb([+.]me)?$`)

// readMIG reads nvidia.com/mig-<profile>: N, one profile per container.
func readMIG(c container, es []entry) (Request, field.ErrorList) {
	var errs field.ErrorList
	for _, e := range es[1:] {
		errs = append(errs, field.Forbidden(e.path, c.detail(
			"asks for two MIG profiles (%s; %s); ask for one MIG profile per container", es[0], e)))
	}
	e := es[0]
	raw := strings.TrimPrefix(string(e.key), ResourceMIGPrefix)
	if !migProfile.MatchString(raw) {
		errs = append(errs, field.Invalid(e.path, string(e.key), c.detail(
			"%q is not a MIG profile; accepted: %s<compute>g.<memory>gb, optionally followed by +me or .me, "+
				"such as %s1g.10gb or %s3g.40gb", raw, ResourceMIGPrefix, ResourceMIGPrefix, ResourceMIGPrefix)))
	}
	count, es2 := c.integer(e)
	profile := raw
	if base, ok := strings.CutSuffix(raw, ".me"); ok {
		profile = base + "+me"
	}
	return Request{Form: Profile, Count: count, Profile: profile}, append(errs, es2...)
}

// byKey indexes entries by resource name.
func byKey(es []entry) map[corev1.ResourceName]entry {
	m := make(map[corev1.ResourceName]entry, len(es))
	for _, e := range es {
		m[e.key] = e
	}
	return m
}
