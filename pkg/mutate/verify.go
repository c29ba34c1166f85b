package mutate

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gpuadmit/gpuadmit/pkg/intent"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/write"
	"github.com/gpuadmit/gpuadmit/pkg/poolowner"
)

// verify admits a pod that arrives with gpuadmit's annotations only if they
// are what gpuadmit wrote for it. A record sealed under a key this replica
// holds, and still good for this pod (see stale), is checked as it stands
// (verifySealed); a sealed record that is not good here any more is
// decided again (verifyExpired). Any other record is checked by deciding
// again (verifyByDeciding).
func (m *Mutator) verify(ctx context.Context, req Request) (Result, error) {
	keys := m.keys()
	if len(keys.Current) == 0 {
		return m.verifyByDeciding(ctx, req, nil)
	}
	s, err := record.Unseal(keys, namespaceOf(req).Name, req.Pod)
	if err != nil {
		logf.FromContext(ctx).V(2).Info("record not sealed for this replica; deciding again", "pod", podRef(req.Pod), "reason", err.Error())
		return m.verifyByDeciding(ctx, req, err)
	}
	why, err := m.stale(ctx, req, s)
	if err != nil {
		return Result{}, err
	}
	if why != "" {
		logf.FromContext(ctx).V(2).Info("sealed record not taken as it stands; deciding again", "pod", podRef(req.Pod), "reason", why)
		return m.verifyExpired(ctx, req, s, why)
	}
	return verifySealed(req.Pod, s.Written), nil
}

// verifySealed admits a pod whose MAC verifies and is still good for it,
// unchanged, when every value gpuadmit wrote is still in it as written and
// it has no GPU beyond them — whatever the nodes or the policy are now:
// gpuadmit decided for this pod (or for the workload that owns it) and a
// later webhook (reinvocation) must not undo that.
func verifySealed(pod *corev1.Pod, w *record.Written) Result {
	if miss := w.Missing(pod); len(miss) > 0 {
		return deny(pod, forged("the record is sealed, but the pod is no longer as gpuadmit wrote it at "+strings.Join(miss, ", ")))
	}
	return Result{Allowed: true, Pod: pod, Revision: w.Revision,
		Explanation: fmt.Sprintf("gpuadmit already decided for this pod (policy revision %s); its sealed record verifies and every value gpuadmit wrote is in place, so nothing changes.", w.Revision)}
}

// verifyByDeciding decides again for a record whose seal does not verify
// here (or where no key is configured) and requires the result to equal
// the pod as it arrived, seal aside: a difference is a forgery. unsealed
// says why the seal did not verify; nil where no key is configured.
func (m *Mutator) verifyByDeciding(ctx context.Context, req Request, unsealed error) (Result, error) {
	return m.redecide(ctx, req, denials{
		unreadable: func(err error) string { return forged(withSealReason(err.Error(), unsealed)) },
		denied: func(now Result) string {
			return withSealReason("the pod carries gpuadmit's record, but its recorded request is denied now: "+now.Message, unsealed)
		},
		differs: func(_ Result, patch []jsonpatch.Operation) string {
			return forged(withSealReason("the pod differs from what gpuadmit writes for it at "+write.Paths(patch), unsealed))
		},
	})
}

// verifyExpired decides again for a record gpuadmit sealed whose seal is
// not good for this pod any more (why says which rule of stale): a saved
// pod applied again, a record copied onto another pod. The record is
// genuine, so a different decision is not a forgery but a change of policy
// or of the cluster's pools, and the denial says what changed and why.
func (m *Mutator) verifyExpired(ctx context.Context, req Request, s *record.Sealed, why string) (Result, error) {
	was := fmt.Sprintf("gpuadmit decided this pod under policy revision %s", s.Written.Revision)
	if s.Written.SealedAt != 0 {
		was += " at " + s.At().Format(time.RFC3339)
	}
	was += "; its seal is not taken as it stands because " + why + ", so gpuadmit decided it again"
	return m.redecide(ctx, req, denials{
		unreadable: func(err error) string { return forged(err.Error()) },
		denied: func(now Result) string {
			return was + ", and " + revisionNow(now.Revision, s.Written.Revision) + " denies its recorded request: " + now.Message
		},
		differs: func(now Result, patch []jsonpatch.Operation) string {
			return fmt.Sprintf("%s, and %s gives it something else: %s. Remove the gpuadmit.io/ annotations gpuadmit wrote (other than %s) "+
				"and the values they record, and submit the pod as its author wrote it, to get what the policy gives now",
				was, revisionNow(now.Revision, s.Written.Revision), changes(req.Pod, patch), userAnnotations)
		},
	})
}

// revisionNow says which policy decided now, against the recorded one.
func revisionNow(now, recorded string) string {
	switch now {
	case "":
		return "gpuadmit, under the policy and on the GPU pools as they are now,"
	case recorded:
		return fmt.Sprintf("the same policy revision (%s), on the cluster's GPU pools as they are now,", recorded)
	}
	return fmt.Sprintf("policy revision %s (it was %s)", now, recorded)
}

// denials word the denials of redecide: a record that cannot be read back
// (unreadable), a recorded request the policy denies now (denied), and a
// decision that differs from the pod as it arrived at patch's paths (differs).
type denials struct {
	unreadable func(err error) string
	denied     func(now Result) string
	differs    func(now Result, patch []jsonpatch.Operation) string
}

// redecide restores the recorded request, decides again, and admits the
// pod as it arrived, with a fresh seal, where the decision is the same.
// The policy revision in the record may be older than the active one; if
// the decision is the same, the record keeps the revision that made it.
// Otherwise the pod is denied as say words it.
func (m *Mutator) redecide(ctx context.Context, req Request, say denials) (Result, error) {
	pod := req.Pod
	rec, err := record.DecodeOriginal(pod)
	if err != nil {
		return deny(pod, say.unreadable(err)), nil
	}
	orig, err := unmutate(pod, rec)
	if err != nil {
		return deny(pod, say.unreadable(err)), nil
	}
	again := req
	again.Pod = orig
	out, err := m.decide(ctx, again)
	if err != nil {
		return Result{}, err
	}
	if !out.Allowed {
		return deny(pod, say.denied(out)), nil
	}
	keepRecordedRevision(out.Pod, pod)
	keepUnrecordedModels(out.Pod, pod)
	if err := m.seal(req, &out); err != nil {
		return Result{}, err
	}
	patch, err := write.Patch(record.WithSealOf(pod, out.Pod), out.Pod)
	if err != nil {
		return Result{}, err
	}
	if len(patch) > 0 {
		return deny(pod, say.differs(out, patch)), nil
	}
	out.Pod = record.WithSealOf(pod, out.Pod)
	out.Explanation = "gpuadmit already decided for this pod and would decide the same now; nothing changes. " + out.Explanation
	return withPatch(pod, out)
}

// unmutate rebuilds the pod as its author wrote it: the recorded GPU
// resources restored, gpuadmit's annotations removed. Everything else stays,
// so deciding again yields the same selectors, tolerations and priority.
func unmutate(pod *corev1.Pod, r record.Original) (*corev1.Pod, error) {
	out := pod.DeepCopy()
	if err := write.RestoreScheduler(out); err != nil {
		return nil, err
	}
	for k := range out.Annotations {
		if record.IsOwnAnnotation(k) {
			delete(out.Annotations, k)
		}
	}
	write.RemoveClaims(out)
	found := 0
	for _, list := range [][]corev1.Container{out.Spec.InitContainers, out.Spec.Containers} {
		for i := range list {
			res, ok := r[list[i].Name]
			if !ok {
				continue
			}
			found++
			if err := record.Restore(&list[i], res); err != nil {
				return nil, err
			}
		}
	}
	if found != len(r) {
		return nil, fmt.Errorf("%s names containers the pod does not have", record.AnnotationRequest)
	}
	return out, nil
}

// withSealReason adds why the seal did not verify, where there was one to verify.
func withSealReason(why string, unsealed error) string {
	if unsealed == nil {
		return why
	}
	return why + " (and its seal does not verify: " + unsealed.Error() + ")"
}

// userAnnotations names the gpuadmit.io/ annotations that belong to pod
// authors, not to gpuadmit's record (record.IsOwnAnnotation), as a denial
// that asks to remove the record names them.
const userAnnotations = intent.AnnotationClass + ", " + intent.AnnotationBackend + " and " + intent.AnnotationModel

func forged(why string) string {
	return fmt.Sprintf("metadata.annotations: the gpuadmit.io/ annotations (other than %s) are gpuadmit's own record and cannot be set by hand: %s. Remove them and submit the pod as its author wrote it",
		userAnnotations, why)
}

// keepRecordedRevision puts the arriving pod's revision into the recomputed record.
func keepRecordedRevision(out, arrived *corev1.Pod) {
	have := arrived.Annotations[record.AnnotationDecision]
	got := out.Annotations[record.AnnotationDecision]
	i, j := strings.LastIndex(have, poolowner.RevisionMark), strings.LastIndex(got, poolowner.RevisionMark)
	if i < 0 || j < 0 || have[:i] != got[:j] {
		return
	}
	out.Annotations[record.AnnotationDecision] = have
}

// keepUnrecordedModels leaves record.AnnotationAcceptedModels off the recomputed
// pod where the arriving pod has none: gpuadmit decided it before it wrote
// that annotation. The annotation steers later picks only, never what the
// pod gets, so a record without it is not a forgery; one that differs is.
func keepUnrecordedModels(out, arrived *corev1.Pod) {
	if _, ok := arrived.Annotations[record.AnnotationAcceptedModels]; !ok {
		delete(out.Annotations, record.AnnotationAcceptedModels)
	}
}

// withPatch adds the patch from the arriving pod to the result's pod.
func withPatch(arrived *corev1.Pod, out Result) (Result, error) {
	patch, err := write.Patch(arrived, out.Pod)
	if err != nil {
		return Result{}, err
	}
	out.Patch = patch
	return out, nil
}
