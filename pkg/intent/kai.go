package intent

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	kaiFractionAccepted = "accepted: a decimal above 0 and at most 1, such as 0.5 or .25"
	kaiMemoryAccepted   = "accepted: an integer number of MiB per GPU from 1 to 1048576"
	kaiCountAccepted    = "accepted: an integer number of GPUs from 1 to 256"
)

// kaiKeys are KAI's annotations, in the order their sources are listed.
var kaiKeys = []string{AnnotationKAIFraction, AnnotationKAINumDevices, AnnotationKAIContainerName, AnnotationKAIMemory}

// annotations is the path of the pod's annotations.
var annotations = field.NewPath("metadata", "annotations")

// kaiRequest is the request KAI's annotations make, and the container it is for.
type kaiRequest struct {
	target  string // path of the container the request belongs to
	req     Request
	sources []string
	path    *field.Path
}

// group presents the KAI request as a dialect group of its container.
func (k *kaiRequest) group() group {
	return group{dialect: KAI, path: k.path, sources: k.sources}
}

// readKAI reads KAI's pod annotations; nil when the pod has none.
func readKAI(ann map[string]string, ctrs []container) (*kaiRequest, field.ErrorList) {
	_, hasFrac := ann[AnnotationKAIFraction]
	_, hasMem := ann[AnnotationKAIMemory]
	var sources []string
	for _, k := range kaiKeys {
		if v, ok := ann[k]; ok {
			sources = append(sources, fmt.Sprintf("annotation %s=%s", k, v))
		}
	}
	switch {
	case len(sources) == 0:
		return nil, nil
	case !hasFrac && !hasMem:
		return nil, kaiAlone(ann)
	}
	primary := AnnotationKAIFraction
	if !hasFrac {
		primary = AnnotationKAIMemory
	}
	c, errs := kaiTarget(ann, ctrs, primary)
	r, errs2 := kaiAmount(ann, c)
	if errs = append(errs, errs2...); len(errs) > 0 {
		return nil, errs
	}
	return &kaiRequest{c.path.String(), r, sources, annotations.Key(primary)}, nil
}

// kaiAlone reports num-devices or container-name without an amount to go with.
func kaiAlone(ann map[string]string) field.ErrorList {
	var errs field.ErrorList
	for _, k := range []string{AnnotationKAINumDevices, AnnotationKAIContainerName} {
		if _, ok := ann[k]; ok {
			errs = append(errs, field.Forbidden(annotations.Key(k), fmt.Sprintf(
				"%s is only meaningful with %s or %s; add %s (a decimal above 0 and at most 1) or %s (MiB per GPU), or remove %s",
				k, AnnotationKAIFraction, AnnotationKAIMemory, AnnotationKAIFraction, AnnotationKAIMemory, k)))
		}
	}
	return errs
}

// kaiTarget finds the container KAI gives the GPU to: the one named by
// gpu-fraction-container-name (app containers first), else the first app container.
func kaiTarget(ann map[string]string, ctrs []container, primary string) (*container, field.ErrorList) {
	name, named := ann[AnnotationKAIContainerName]
	for _, kind := range []Kind{App, Init, Sidecar} {
		for i := range ctrs {
			if ctrs[i].kind == kind && (!named || ctrs[i].name == name) {
				return &ctrs[i], nil
			}
		}
	}
	if !named {
		return nil, field.ErrorList{field.Required(annotations.Key(primary),
			"the pod has no app container to give the GPU to; add a container")}
	}
	names := make([]string, len(ctrs))
	for i, c := range ctrs {
		names[i] = strconv.Quote(c.name)
	}
	return nil, field.ErrorList{field.Invalid(annotations.Key(AnnotationKAIContainerName), name, fmt.Sprintf(
		"no container or init container is named %q; accepted: one of %s", name, strings.Join(names, ", ")))}
}

// kaiAmount reads gpu-fraction or gpu-memory, and gpu-fraction-num-devices,
// naming c in its errors when it is known.
func kaiAmount(ann map[string]string, c *container) (Request, field.ErrorList) {
	detail := fmt.Sprintf
	if c != nil {
		detail = c.detail
	}
	r := Request{Count: 1}
	var errs field.ErrorList
	if s, ok := ann[AnnotationKAINumDevices]; ok {
		r.Count, errs = kaiInteger(AnnotationKAINumDevices, s, MaxCount, kaiCountAccepted, detail)
	}
	frac, hasFrac := ann[AnnotationKAIFraction]
	mem, hasMem := ann[AnnotationKAIMemory]
	var errs2 field.ErrorList
	switch {
	case hasFrac && hasMem:
		errs2 = field.ErrorList{field.Forbidden(annotations.Key(AnnotationKAIMemory), detail(
			"annotations %s=%s and %s=%s together are contradictory; ask for a fraction or for memory, not both",
			AnnotationKAIFraction, frac, AnnotationKAIMemory, mem))}
	case hasFrac:
		r.Form = Fraction
		r.FractionMilli, errs2 = kaiFraction(frac, detail)
	default:
		r.Form = Memory
		r.MemoryMiB, errs2 = kaiInteger(AnnotationKAIMemory, mem, MaxMemoryMiB, kaiMemoryAccepted, detail)
	}
	return r, append(errs, errs2...)
}

// kaiInteger reads an integer annotation from 1 to max.
func kaiInteger(key, s string, max int64, accepted string, detail func(string, ...any) string) (int64, field.ErrorList) {
	v, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil:
		return 0, field.ErrorList{field.Invalid(annotations.Key(key), s, detail("%s %q is not an integer; %s", key, s, accepted))}
	case v == 0:
		return 0, field.ErrorList{field.Invalid(annotations.Key(key), s, detail("%s=0 asks for no GPU; remove the annotation or ask for at least 1", key))}
	case v < 1 || v > max:
		return 0, field.ErrorList{field.Invalid(annotations.Key(key), s, detail("%s %q is out of range; %s", key, s, accepted))}
	}
	return v, nil
}

// kaiFraction reads gpu-fraction in thousandths of a GPU, rounding up.
func kaiFraction(s string, detail func(string, ...any) string) (int64, field.ErrorList) {
	milli, ok := parseMilli(s)
	if ok && milli >= 1 && milli <= 1000 {
		return milli, nil
	}
	return 0, field.ErrorList{field.Invalid(annotations.Key(AnnotationKAIFraction), s, detail(
		"%s %q is not a fraction of a GPU; %s", AnnotationKAIFraction, s, kaiFractionAccepted))}
}

// parseMilli parses a plain non-negative decimal ("0.5", ".25", "1") into
// thousandths, rounding up; values above 1000 thousandths are capped at 1001.
func parseMilli(s string) (int64, bool) {
	whole, frac, dot := strings.Cut(s, ".")
	if whole+frac == "" || !isDigits(whole) || !isDigits(frac) || (dot && frac == "") {
		return 0, false
	}
	whole = strings.TrimLeft(whole, "0")
	if len(whole) > 1 || whole > "1" {
		return 1001, true
	}
	milli, _ := strconv.ParseInt((frac + "000")[:3], 10, 64)
	if strings.Trim(frac[min(3, len(frac)):], "0") != "" {
		milli++
	}
	if whole == "1" {
		milli += 1000
	}
	return milli, true
}

// isDigits reports whether s holds only ASCII digits (or nothing).
func isDigits(s string) bool {
	return strings.Trim(s, "0123456789") == ""
}
