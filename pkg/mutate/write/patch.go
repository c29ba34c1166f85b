package write

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
)

// writtenPatch is the patch that turns a into b when the two pods differ
// only in the fields gpuadmit writes (writtenDoc), with ok; it encodes and
// compares those fields alone, not the two pods whole, which was a fifth
// of the webhook's CPU per pod. Where anything else differs (a pod edited
// elsewhere, a field a future change writes), ok is false and the caller
// compares the pods whole. The JSON of the fields carries the same names
// and omitempty as the Pod's, and containers keep their indices, so the
// patch is the one the pods whole give (TestWrittenPatchIsThePodPatch).
func writtenPatch(a, b *corev1.Pod) ([]jsonpatch.Operation, bool, error) {
	if !sameUnwritten(a, b) {
		return nil, false, nil
	}
	da, db := writtenOf(a), writtenOf(b)
	da.Metadata.Labels, db.Metadata.Labels = unchangedAsOne(a.Labels, b.Labels)
	da.Metadata.Annotations, db.Metadata.Annotations = unchangedAsOne(a.Annotations, b.Annotations)
	ja, err := json.Marshal(da)
	if err != nil {
		return nil, false, fmt.Errorf("encode pod: %w", err)
	}
	jb, err := json.Marshal(db)
	if err != nil {
		return nil, false, fmt.Errorf("encode mutated pod: %w", err)
	}
	if patch, ok := patches.get(ja, jb); ok {
		return patch, true, nil
	}
	patch, err := jsonPatch(ja, jb)
	if err != nil {
		return nil, false, err
	}
	patches.put(ja, jb, patch)
	return slices.Clone(patch), true, nil
}

// unchangedAsOne is a and b, a map's value before and after gpuadmit
// wrote it, with the keys they hold alike folded into one key of their own
// (unchangedKey), which no patch touches: the patch between the two is
// the patch between a and b, and pods that differ only in labels or
// annotations gpuadmit leaves alone (a framework's per-pod index label)
// share one patch memo entry. nil stays nil, so that a map added or
// removed whole is patched as it was.
func unchangedAsOne(a, b map[string]string) (map[string]string, map[string]string) {
	alike := 0
	for k, v := range a {
		if w, ok := b[k]; ok && w == v {
			alike++
		}
	}
	if alike == 0 {
		return a, b
	}
	fold := func(m, other map[string]string) map[string]string {
		out := make(map[string]string, len(m)-alike+1)
		for k, v := range m {
			if w, ok := other[k]; !ok || w != v {
				out[k] = v
			}
		}
		out[unchangedKey] = ""
		return out
	}
	return fold(a, b), fold(b, a)
}

// unchangedKey stands for the keys unchangedAsOne folds; it is not a valid
// label or annotation key, so no pod holds it.
const unchangedKey = "\x00unchanged"

// patchMemo remembers the patches between the written fields of pods as
// they arrive and as gpuadmit writes them. The pods of one template arrive
// alike in those fields and are decided alike, so they share one patch:
// comparing the two documents (jsonpatch decodes both into maps) was a
// quarter of a memoized decision. An entry is found only for the same
// bytes, compared whole.
type patchMemo struct {
	mu sync.Mutex
	m  map[[2]uint64][]patchEntry
	n  int
}

type patchEntry struct {
	a, b  []byte
	patch []jsonpatch.Operation
}

// patchMemoLimit bounds the entries; the memo starts over when full.
const patchMemoLimit = 512

var patches = &patchMemo{}

func patchKey(a, b []byte) [2]uint64 {
	h := fnv.New64a()
	h.Write(a)
	ka := h.Sum64()
	h.Reset()
	h.Write(b)
	return [2]uint64{ka, h.Sum64()}
}

// get returns a copy of the patch from a to b, if remembered.
func (m *patchMemo) get(a, b []byte) ([]jsonpatch.Operation, bool) {
	k := patchKey(a, b)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.m[k] {
		if bytes.Equal(e.a, a) && bytes.Equal(e.b, b) {
			return slices.Clone(e.patch), true
		}
	}
	return nil, false
}

// put remembers patch from a to b; the caller keeps neither a, b nor patch
// to change them.
func (m *patchMemo) put(a, b []byte, patch []jsonpatch.Operation) {
	k := patchKey(a, b)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil || m.n >= patchMemoLimit {
		m.m, m.n = map[[2]uint64][]patchEntry{}, 0
	}
	m.m[k] = append(m.m[k], patchEntry{a: a, b: b, patch: patch})
	m.n++
}

// writtenDoc is the part of a Pod that gpuadmit writes, under the Pod's own
// JSON names.
type writtenDoc struct {
	Metadata struct {
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	} `json:"metadata"`
	Spec struct {
		InitContainers    []writtenContainer           `json:"initContainers,omitempty"`
		Containers        []writtenContainer           `json:"containers"`
		NodeSelector      map[string]string            `json:"nodeSelector,omitempty"`
		Affinity          *corev1.Affinity             `json:"affinity,omitempty"`
		SchedulerName     string                       `json:"schedulerName,omitempty"`
		Tolerations       []corev1.Toleration          `json:"tolerations,omitempty"`
		PriorityClassName string                       `json:"priorityClassName,omitempty"`
		Priority          *int32                       `json:"priority,omitempty"`
		PreemptionPolicy  *corev1.PreemptionPolicy     `json:"preemptionPolicy,omitempty"`
		ResourceClaims    []corev1.PodResourceClaim    `json:"resourceClaims,omitempty"`
		Resources         *corev1.ResourceRequirements `json:"resources,omitempty"`
	} `json:"spec"`
}

type writtenContainer struct {
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
}

func writtenOf(p *corev1.Pod) *writtenDoc {
	d := &writtenDoc{}
	d.Metadata.Labels, d.Metadata.Annotations = p.Labels, p.Annotations
	s := &d.Spec
	s.InitContainers, s.Containers = writtenContainers(p.Spec.InitContainers), writtenContainers(p.Spec.Containers)
	s.NodeSelector, s.Affinity, s.SchedulerName, s.Tolerations = p.Spec.NodeSelector, p.Spec.Affinity, p.Spec.SchedulerName, p.Spec.Tolerations
	s.PriorityClassName, s.Priority, s.PreemptionPolicy = p.Spec.PriorityClassName, p.Spec.Priority, p.Spec.PreemptionPolicy
	s.ResourceClaims, s.Resources = p.Spec.ResourceClaims, p.Spec.Resources
	return d
}

func writtenContainers(cs []corev1.Container) []writtenContainer {
	if cs == nil {
		return nil
	}
	out := make([]writtenContainer, len(cs))
	for i, c := range cs {
		out[i].Resources = c.Resources
	}
	return out
}

// sameUnwritten reports whether a and b are the same pod but for the
// fields of writtenDoc, and have as many containers of each kind.
func sameUnwritten(a, b *corev1.Pod) bool {
	if len(a.Spec.Containers) != len(b.Spec.Containers) || len(a.Spec.InitContainers) != len(b.Spec.InitContainers) {
		return false
	}
	ua, ub := unwritten(a), unwritten(b)
	return reflect.DeepEqual(&ua, &ub)
}

// unwritten is p without the fields of writtenDoc: a shallow copy, the
// containers copied without their resources.
func unwritten(p *corev1.Pod) corev1.Pod {
	u := *p
	u.Labels, u.Annotations = nil, nil
	s := &u.Spec
	s.InitContainers, s.Containers = withoutResources(s.InitContainers), withoutResources(s.Containers)
	s.NodeSelector, s.Affinity, s.SchedulerName, s.Tolerations = nil, nil, "", nil
	s.PriorityClassName, s.Priority, s.PreemptionPolicy = "", nil, nil
	s.ResourceClaims, s.Resources = nil, nil
	return u
}

func withoutResources(cs []corev1.Container) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	copy(out, cs)
	for i := range out {
		out[i].Resources = corev1.ResourceRequirements{}
	}
	return out
}

// patchOp is a jsonpatch.Operation as the patch's JSON carries it.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// jsonNull is an add or replace operation's value null, which omitempty
// would drop.
var jsonNull = json.RawMessage("null")

// MarshalPatch is ops as JSON, the bytes controller-runtime's
// Response.Complete makes of them (jsonpatch.Operation's MarshalJSON: value
// null kept for add and replace, left out of other operations when nil),
// made in one pass: Complete marshals each operation on its own, and
// encoding/json then checks and compacts each operation's bytes again,
// which was a sixth of BenchmarkHandler.
func MarshalPatch(ops []jsonpatch.Operation) ([]byte, error) {
	out := make([]patchOp, len(ops))
	for i, op := range ops {
		out[i] = patchOp{Op: op.Operation, Path: op.Path, Value: op.Value}
		if op.Value == nil && (op.Operation == "add" || op.Operation == "replace") {
			out[i].Value = jsonNull
		}
	}
	return json.Marshal(out)
}

// Patch is the RFC 6902 patch that turns a into b: from the fields gpuadmit
// writes alone (writtenPatch) where nothing else differs, else from the
// whole pods. Both give the same patch.
func Patch(a, b *corev1.Pod) ([]jsonpatch.Operation, error) {
	if patch, ok, err := writtenPatch(a, b); ok || err != nil {
		return patch, err
	}
	return podPatch(a, b)
}

// podPatch is the patch that turns a into b, from both pods whole.
func podPatch(a, b *corev1.Pod) ([]jsonpatch.Operation, error) {
	ja, err := json.Marshal(a)
	if err != nil {
		return nil, fmt.Errorf("encode pod: %w", err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("encode mutated pod: %w", err)
	}
	return jsonPatch(ja, jb)
}

// jsonPatch is the patch between two JSON documents, in a stable order.
func jsonPatch(ja, jb []byte) ([]jsonpatch.Operation, error) {
	patch, err := jsonpatch.CreatePatch(ja, jb)
	if err != nil {
		return nil, fmt.Errorf("create patch: %w", err)
	}
	sortPatch(patch)
	return patch, nil
}

// sortPatch orders operations by path, numeric segments as numbers, so the
// same change always gives the same patch (CreatePatch walks maps in random
// order). gpuadmit only changes map keys and appends to arrays, for which
// ascending paths are a valid order.
func sortPatch(patch []jsonpatch.Operation) {
	sort.SliceStable(patch, func(i, j int) bool { return pathLess(patch[i].Path, patch[j].Path) })
}

func pathLess(a, b string) bool {
	for {
		as, arest, amore := strings.Cut(a, "/")
		bs, brest, bmore := strings.Cut(b, "/")
		if as != bs {
			ai, anum := index(as)
			bi, bnum := index(bs)
			if anum && bnum {
				return ai < bi
			}
			return as < bs
		}
		if !amore || !bmore {
			return !amore && bmore // the shorter path first
		}
		a, b = arest, brest
	}
}

// index reads a path segment that is an array index; it allocates nothing
// (strconv.Atoi's error for every map key would).
func index(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// Paths are the paths the patch changes, for a message.
func Paths(patch []jsonpatch.Operation) string {
	ps := make([]string, len(patch))
	for i, op := range patch {
		ps[i] = op.Path
	}
	return strings.Join(ps, ", ")
}
