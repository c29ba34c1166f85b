package intent

import (
	"slices"
	"strings"
)

// Schedulers of other GPU stacks whose pods gpuadmit can take over.
const (
	SchedulerKAI     = "kai-scheduler"
	SchedulerVolcano = "volcano"
	SchedulerHAMi    = "hami-scheduler"
)

// hintAnnotations are the nvidia.com/ pod annotations HAMi's scheduler (and
// Volcano's vGPU plugin, for the GPU types) reads, all of which readForeign
// translates or warns about.
var hintAnnotations = []string{
	AnnotationHAMiUseType, AnnotationHAMiNoUseType, AnnotationHAMiMode,
	AnnotationHAMiUseUUID, AnnotationHAMiNoUseUUID, AnnotationHAMiNUMABind,
}

// SchedulerAnnotations lists, sorted, the keys of ann that only the named
// scheduler reads: KAI's gpu-fraction annotations, Volcano's volcano.sh/
// annotations, HAMi's hami.io/ annotations and the nvidia.com/ hints either
// of the last two reads. When a pod moves from that scheduler to another,
// these go with it: gpuadmit has read them into the pod's request and hints,
// and no other scheduler understands them. Nil for any other scheduler.
func SchedulerAnnotations(scheduler string, ann map[string]string) []string {
	var belongs func(string) bool
	switch scheduler {
	case SchedulerKAI:
		belongs = func(k string) bool { return slices.Contains(kaiKeys, k) }
	case SchedulerVolcano:
		belongs = func(k string) bool {
			return strings.HasPrefix(k, "volcano.sh/") || k == AnnotationHAMiUseType || k == AnnotationHAMiNoUseType
		}
	case SchedulerHAMi:
		belongs = func(k string) bool { return strings.HasPrefix(k, "hami.io/") || slices.Contains(hintAnnotations, k) }
	default:
		return nil
	}
	var out []string
	for k := range ann {
		if belongs(k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
