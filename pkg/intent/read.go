package intent

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Read reads every container's GPU request into one normalized Request per
// GPU container, in pod order, and the pod-level hints. It validates as it
// reads and collects every error; a container with errors has no Request.
// A nil pod reads as an empty Pod.
func Read(pod *corev1.Pod) (Pod, field.ErrorList) {
	if pod == nil {
		return Pod{}, nil
	}
	out, errs := readHints(&pod.ObjectMeta)
	ctrs := containers(&pod.Spec)
	kai, errs2 := readKAI(pod.Annotations, ctrs)
	errs = append(errs, errs2...)
	for _, c := range ctrs {
		r, ok, cerrs := c.read(kai)
		if ok && r.Dialect == NVIDIAShared {
			cerrs = c.onReplicas(&out, pod.Annotations)
			ok = len(cerrs) == 0
		}
		errs = append(errs, cerrs...)
		if ok {
			out.Warnings = append(out.Warnings, r.Warnings...)
			r.Warnings = nil
			out.Requests = append(out.Requests, r)
		}
	}
	return out, errs
}

// read reads the container's own GPU resources, or the KAI request when it
// is the container KAI's annotations give the GPU to. ok is false when the
// container asks for no GPU or asks wrongly.
func (c container) read(kai *kaiRequest) (r Request, ok bool, errs field.ErrorList) {
	es, errs := c.entries()
	groups := groupByDialect(es)
	if kai != nil && kai.target == c.path.String() {
		groups = append([]group{kai.group()}, groups...)
	}
	switch {
	case len(errs) > 0 || len(groups) == 0:
		return Request{}, false, errs
	case len(groups) > 1:
		return Request{}, false, field.ErrorList{c.twoDialects(groups)}
	case groups[0].dialect == KAI:
		r = kai.req
	default:
		r, errs = readers[groups[0].dialect](c, groups[0].entries)
	}
	r.Container, r.Kind, r.Index, r.Dialect = c.name, c.kind, c.index, groups[0].dialect
	r.Source = groups[0].source()
	return r, len(errs) == 0, errs
}

// group is the GPU entries of one dialect in a container.
type group struct {
	dialect Dialect
	entries []entry
	path    *field.Path // where a conflict with another dialect is reported
	sources []string    // set for KAI, whose entries are annotations
}

// source lists the group's keys as sorted "key=value" strings.
func (g group) source() []string {
	out := slices.Clone(g.sources)
	for _, e := range g.entries {
		out = append(out, e.String())
	}
	slices.Sort(out)
	return out
}

// groupByDialect splits entries by dialect, in the order of their first key;
// nvidia.com/gpu joins HAMi when a HAMi key is beside it.
func groupByDialect(es []entry) []group {
	hami := slices.ContainsFunc(es, func(e entry) bool { return dialectOf(e.key) == HAMi })
	var out []group
	for _, e := range es {
		d := dialectOf(e.key)
		if d == NVIDIA && hami {
			d = HAMi
		}
		i := slices.IndexFunc(out, func(g group) bool { return g.dialect == d })
		if i < 0 {
			out = append(out, group{dialect: d, path: e.path})
			i = len(out) - 1
		}
		out[i].entries = append(out[i].entries, e)
	}
	return out
}

// twoDialects reports a container that mixes dialects, at the second one's first key.
func (c container) twoDialects(groups []group) *field.Error {
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = fmt.Sprintf("%s: %s", g.dialect, strings.Join(g.source(), ", "))
	}
	n := map[int]string{2: "two", 3: "three"}[len(groups)]
	if n == "" {
		n = fmt.Sprint(len(groups))
	}
	return field.Forbidden(groups[1].path, fmt.Sprintf("container %q asks for GPU in %s dialects (%s); use one",
		c.name, n, strings.Join(parts, "; ")))
}
