package mutate

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

// DefaultSealWindow is MutatorOptions.SealWindow's default: the API
// server's default --request-timeout (60s), which bounds every call and
// reinvocation of one request's mutating webhooks, plus 30s for the clock
// skew between the replica that sealed and the one that checks.
const DefaultSealWindow = 90 * time.Second

// WorkloadReader reads the live workload a pod's controller ownerReference
// names. The webhook reads it from the API server, not a cache: a Job
// created a moment ago must be found, and a deleted one must not.
type WorkloadReader interface {
	// PodTemplateOf returns the UID of the workload of kind (Job) named
	// name in namespace and its pod template's annotations; found is
	// false where there is no such workload.
	PodTemplateOf(ctx context.Context, namespace, kind, name string) (uid types.UID, annotations map[string]string, found bool, err error)
}

func (m *Mutator) now() time.Time {
	if m.opts.Clock == nil {
		return clock.RealClock{}.Now()
	}
	return m.opts.Clock.Now()
}

func (m *Mutator) window() time.Duration {
	if m.opts.SealWindow <= 0 {
		return DefaultSealWindow
	}
	return m.opts.SealWindow
}

// stale says why a seal that verifies is not taken as it stands for req,
// or "" where it is. What a seal vouches for depends on where it was
// written and where it arrives:
//
//   - A pod's own seal (no workload) holds within the seal window of its
//     sealing time, either way (clock skew): the API server reinvoking
//     gpuadmit for the request that sealed it. Nothing else in a
//     reinvocation is the same as in the first call and unlike a saved
//     pod: the AdmissionReview's request.uid is new for every call, the
//     object has no name yet where it was created with generateName and
//     never a UID (the API server sets both after mutating admission), and
//     a name it does have is the same in a saved pod applied again.
//   - A template's seal (bound to a workload) holds on the pods that
//     workload owns, for as long as it lives (see ownedBy), and on its
//     own template within the window (the reinvocation of the workload's
//     CREATE).
//   - A seal of an older gpuadmit (record.MACVersion1) has no time and no
//     workload: it holds on pods of the live workload whose template
//     carries it (Jobs admitted before the upgrade keep their pods), and
//     nowhere else.
func (m *Mutator) stale(ctx context.Context, req Request, s *record.Sealed) (string, error) {
	switch {
	case req.Template && (s.Written.Workload == nil || *s.Written.Workload != req.Workload):
		return fmt.Sprintf("a pod template's seal holds only for the workload it was sealed for, and this one was sealed for %s", sealedFor(s)), nil
	case req.Template, s.Version == record.MACVersion && s.Written.Workload == nil:
		return m.outsideWindow(s), nil
	case s.Written.Workload != nil:
		return m.ownedBy(ctx, req.Pod, *s.Written.Workload, s.MAC)
	}
	ref := metav1.GetControllerOf(req.Pod)
	if ref == nil || ref.Kind != "Job" {
		return "it was sealed by a gpuadmit release whose seals did not expire, and such a seal holds only on the pods of the live Job whose template carries it", nil
	}
	return m.ownedBy(ctx, req.Pod, record.WorkloadRef{Kind: ref.Kind, Name: ref.Name}, s.MAC)
}

// outsideWindow is "" when s was sealed within the seal window of now.
func (m *Mutator) outsideWindow(s *record.Sealed) string {
	age := m.now().Sub(s.At())
	if age.Abs() <= m.window() {
		return ""
	}
	return fmt.Sprintf("it was sealed at %s, %s ago, and a seal is taken as it stands only within %s of sealing (the API server's reinvocation of the same request)",
		s.At().Format(time.RFC3339), age.Truncate(time.Second), m.window())
}

// ownedBy is "" when pod's controller is the live workload wl, with the
// UID the pod's ownerReference names, and that workload's pod template
// carries the seal mac. The seal cannot name the workload's UID: the API
// server assigns it after mutating admission (the registry's Store.create
// calls rest.FillObjectMetaSystemFields, after the create handler ran the
// mutating webhooks and wiped any UID the client sent), so
// gpuadmit seals the template for the workload's kind and name (or
// generateName prefix) and checks the UID here, against the live object.
// A pod that copies the template's annotations without being that
// workload's pod is decided again, and so are the pods of a workload
// deleted and created again under the same name with another seal.
func (m *Mutator) ownedBy(ctx context.Context, pod *corev1.Pod, wl record.WorkloadRef, mac string) (string, error) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return fmt.Sprintf("it is the seal of %s's pod template, and the pod has no controller ownerReference", wl), nil
	}
	if !isBatchJob(ref) || !wl.Names(ref.Kind, ref.Name) {
		return fmt.Sprintf("it is the seal of %s's pod template, and the pod's controller is %s %s", wl, ref.Kind, ref.Name), nil
	}
	if m.opts.Workloads == nil {
		return fmt.Sprintf("it is the seal of %s's pod template, and this replica reads no workloads", wl), nil
	}
	uid, ann, found, err := m.opts.Workloads.PodTemplateOf(ctx, pod.Namespace, ref.Kind, ref.Name)
	switch {
	case err != nil:
		return "", fmt.Errorf("read %s %s/%s, the controller of pod %s: %w", ref.Kind, pod.Namespace, ref.Name, podRef(pod), err)
	case !found:
		return fmt.Sprintf("it is the seal of %s's pod template, and %s %s does not exist", wl, ref.Kind, ref.Name), nil
	case uid != ref.UID:
		return fmt.Sprintf("it is the seal of %s's pod template, and %s %s is now another object (UID %s, the pod's ownerReference names %s)", wl, ref.Kind, ref.Name, uid, ref.UID), nil
	case ann[record.AnnotationMAC] != mac:
		return fmt.Sprintf("it is the seal of %s's pod template, and the pod template of %s %s carries another seal", wl, ref.Kind, ref.Name), nil
	}
	return "", nil
}

// isBatchJob reports whether ref names a batch Job, the one kind whose
// templates gpuadmit seals.
func isBatchJob(ref *metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == batchv1.GroupName && ref.Kind == "Job"
}

func sealedFor(s *record.Sealed) string {
	switch {
	case s.Version == record.MACVersion1:
		return "no workload (an older gpuadmit's seal)"
	case s.Written.Workload == nil:
		return "a pod, not a workload"
	}
	return s.Written.Workload.String()
}

// changes lists, for a person, what the patch changes in pod: each path
// with the value the pod has there and the one gpuadmit writes now.
func changes(pod *corev1.Pod, patch []jsonpatch.Operation) string {
	var doc any
	if b, err := json.Marshal(pod); err == nil {
		_ = json.Unmarshal(b, &doc)
	}
	parts := make([]string, len(patch))
	for i, op := range patch {
		was, now := "(none)", "(none)"
		if v, ok := pointerValue(doc, op.Path); ok {
			was = short(v)
		}
		if op.Operation != "remove" {
			now = short(op.Value)
		}
		parts[i] = fmt.Sprintf("%s: %s, now %s", op.Path, was, now)
	}
	return strings.Join(parts, "; ")
}

// pointerValue is the value at an RFC 6901 JSON pointer in doc.
func pointerValue(doc any, pointer string) (any, bool) {
	if pointer == "" {
		return doc, true
	}
	for _, seg := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		switch v := doc.(type) {
		case map[string]any:
			var ok bool
			if doc, ok = v[seg]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(v) {
				return nil, false
			}
			doc = v[i]
		default:
			return nil, false
		}
	}
	return doc, true
}

// short is v as JSON, cut to a length a message can carry.
func short(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	const most = 200
	if len(b) > most {
		return string(b[:most]) + "…"
	}
	return string(b)
}
