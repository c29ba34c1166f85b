package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpuadmit/gpuadmit/pkg/mutate"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

// withdrawn is the message of the policy change these tests make: the
// platform team withdraws a namespace's GPU access in Git.
const withdrawn = "GPU access withdrawn from this namespace"

// withdrawGPU swaps in the default policy set plus a rule that denies
// every GPU pod of namespace ns, as a policy change from Git would, and
// waits until it decides; the test's end swaps the default set back in
// and waits until it decides again.
func withdrawGPU(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	version := "withdraw-" + ns
	rule := fmt.Sprintf("package gpuadmit\n\ndeny contains %q if input.namespace.name == %q\n", withdrawn, ns)
	if err := writePolicies(filepath.Join(filepath.Dir(policyDir), version), map[string]string{"withdraw.rego": rule}); err != nil {
		t.Fatal(err)
	}
	probe := h100Pod(ns, "probe")
	swapPolicies(t, version)
	waitFor(t, "the withdrawing policy decides", 30*time.Second, func() (bool, string) {
		err := env.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), withdrawn), errString(err) + "\n" + env.Readyz()
	})
	t.Cleanup(func() {
		swapPolicies(t, "v1")
		waitFor(t, "the default policy decides again", 30*time.Second, func() (bool, string) {
			err := env.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
			return err == nil, errString(err)
		})
	})
}

// sealedAt reads the sealing time from a pod's record.
func sealedAt(t *testing.T, annotations map[string]string) time.Time {
	t.Helper()
	var w struct {
		At int64 `json:"at"`
	}
	if err := json.Unmarshal([]byte(annotations[record.AnnotationWritten]), &w); err != nil || w.At == 0 {
		t.Fatalf("no sealing time in %s %q: %v", record.AnnotationWritten, annotations[record.AnnotationWritten], err)
	}
	return time.Unix(w.At, 0)
}

// asSaved is p as `kubectl get -o yaml` saves it, ready to be applied again.
func asSaved(p *corev1.Pod) *corev1.Pod {
	out := p.DeepCopy()
	out.ResourceVersion, out.UID, out.ManagedFields, out.Status = "", types.UID(""), nil, corev1.PodStatus{}
	out.CreationTimestamp.Reset()
	out.Spec.NodeName = ""
	return out
}

// TestGateSavedPodIsDecidedAgainAfterPolicyChange: a pod gpuadmit admitted
// (a MIG slice) is saved and deleted; the platform team withdraws the
// namespace's GPU access in Git. Applied again past the seal window, the
// saved pod — gpuadmit's sealed record and all — is decided by the new
// policy and refused, with why; once the policy gives the namespace GPU
// again, the same saved pod passes, the same, with a fresh seal.
func TestGateSavedPodIsDecidedAgainAfterPolicyChange(t *testing.T) {
	ctx := context.Background()
	ns := plainNamespace(t, ctx, "gate-saved")
	admitted := h100Pod(ns, "saved")
	if err := env.Client.Create(ctx, admitted); err != nil {
		t.Fatalf("step create: %v", err)
	}
	if !strings.HasPrefix(admitted.Annotations[record.AnnotationMAC], "v2:") {
		t.Fatalf("the admitted pod carries no v2 seal: %v", admitted.Annotations)
	}
	saved := asSaved(admitted)
	if err := env.Client.Delete(ctx, admitted, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ctx, admitted)

	t.Run("withdrawn", func(t *testing.T) {
		withdrawGPU(t, ctx, ns)
		time.Sleep(time.Until(sealedAt(t, saved.Annotations).Add(sealWindow + 2*time.Second)))
		err := env.Client.Create(ctx, saved.DeepCopy())
		if err == nil {
			deleteAll(ctx, ns, saved)
			t.Fatal("the saved pod was admitted on its old seal after the policy withdrew the namespace's GPU")
		}
		for _, want := range []string{"its seal is not taken as it stands", "only within " + sealWindow.String(), withdrawn, "denies its recorded request"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the refusal does not say %q: %v", want, err)
			}
		}
	})

	again := saved.DeepCopy()
	if err := env.Client.Create(ctx, again); err != nil {
		t.Fatalf("the saved pod under the policy that admitted it: %v", err)
	}
	defer deleteAll(ctx, ns, again)
	if again.Annotations[record.AnnotationDecision] != saved.Annotations[record.AnnotationDecision] ||
		!apiEqual(again.Spec.Containers[0].Resources, saved.Spec.Containers[0].Resources) {
		t.Errorf("decided again differently under the same policy:\n%s\n%s", again.Annotations[record.AnnotationDecision], saved.Annotations[record.AnnotationDecision])
	}
	if again.Annotations[record.AnnotationMAC] == saved.Annotations[record.AnnotationMAC] || !sealedAt(t, again.Annotations).After(sealedAt(t, saved.Annotations)) {
		t.Errorf("the pod decided again was not sealed afresh: %v", again.Annotations)
	}
}

// apiEqual compares two API values by their JSON.
func apiEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// TestGateKueueJobKeepsItsSealAcrossPolicyChange: a Job in a Kueue queue
// has its template decided and sealed for it when created; Kueue admits
// it and the Job controller makes its pod. Then the platform team
// withdraws the namespace's GPU access in Git. The pod the live Job makes
// after that (its first pod deleted, replaced) still passes: Kueue
// counted the Job and the seal holds for the Job's pods, for its
// lifetime. A bare pod carrying the same record, the Job's by copy only,
// is decided by the new policy and refused.
//
// The template holds its pods with a scheduling gate so that kwok never
// runs and completes them: the Job needs a pod made after the change.
func TestGateKueueJobKeepsItsSealAcrossPolicyChange(t *testing.T) {
	ctx := context.Background()
	startKueue(t, ctx)
	ns := plainNamespace(t, ctx, "gate-kueue")
	objects := `
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: gate-a100-mig-1g}
spec: {nodeLabels: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-40GB-MIG-1g.5gb}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: gate-gpu}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu, gpuadmit.io/gpu-memory-mib, gpuadmit.io/a100-40gb-mib]
    flavors:
    - name: gate-a100-mig-1g
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 8}
      - {name: gpuadmit.io/gpu-memory-mib, nominalQuota: 200000}
      - {name: gpuadmit.io/a100-40gb-mib, nominalQuota: 200000}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: gpu, namespace: ` + ns + `}
spec: {clusterQueue: gate-gpu}
`
	createKueueObjects(t, ctx, objects)

	asked := readPod(t, filepath.Join(root, "examples/pods/hami-memory.yaml"))
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns, Labels: map[string]string{mutate.LabelKueueQueue: "gpu"}},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1),
			Template: corev1.PodTemplateSpec{Spec: asked.Spec}},
	}
	job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	job.Spec.Template.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "gpuadmit.io/e2e-hold"}}
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatalf("create the Kueue Job: %v", err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), job, client.PropagationPolicy(metav1.DeletePropagationBackground))
	})
	if job.Spec.Template.Annotations[record.AnnotationMAC] == "" {
		t.Fatalf("the Job's template was not sealed: %v", job.Spec.Template.Annotations)
	}
	workloadOf(t, ctx, job)
	first := jobPodOf(t, ctx, job, "")

	withdrawGPU(t, ctx, ns)
	if err := env.Client.Delete(ctx, first, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	second := jobPodOf(t, ctx, job, first.UID)
	if second.Annotations[record.AnnotationMAC] != job.Spec.Template.Annotations[record.AnnotationMAC] {
		t.Errorf("the replacement pod does not carry the template's seal: %v", second.Annotations)
	}
	if second.Annotations[record.AnnotationDecision] != job.Spec.Template.Annotations[record.AnnotationDecision] {
		t.Errorf("the replacement pod was decided again:\n pod:      %s\n template: %s", second.Annotations[record.AnnotationDecision], job.Spec.Template.Annotations[record.AnnotationDecision])
	}

	bare := asSaved(second)
	bare.Name, bare.GenerateName, bare.OwnerReferences, bare.Finalizers = "copied", "", nil, nil
	err := env.Client.Create(ctx, bare)
	if err == nil {
		deleteAll(ctx, ns, bare)
		t.Fatal("a bare pod carrying the Job's sealed record was admitted after the policy withdrew the namespace's GPU")
	}
	for _, want := range []string{"seal of Job/train's pod template", "no controller ownerReference", withdrawn} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the bare copy's refusal does not say %q: %v", want, err)
		}
	}
}

// jobPodOf waits for a pod of job other than the one whose UID is not and
// returns it; a pod the webhook refuses shows as the Job's FailedCreate
// Event, which the failure prints.
func jobPodOf(t *testing.T, ctx context.Context, job *batchv1.Job, not types.UID) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	waitFor(t, "a pod of Job "+job.Name, 90*time.Second, func() (bool, string) {
		var pods corev1.PodList
		if err := env.Client.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
			return false, err.Error()
		}
		for i := range pods.Items {
			if p := &pods.Items[i]; p.UID != not && p.DeletionTimestamp == nil {
				pod = p
				return true, ""
			}
		}
		cur := &batchv1.Job{}
		_ = env.Client.Get(ctx, client.ObjectKeyFromObject(job), cur)
		return false, fmt.Sprintf("no pod yet; job suspended %v, status %+v; events: %s", ptr.Deref(cur.Spec.Suspend, false), cur.Status, jobEvents(ctx, job))
	})
	return pod
}

// jobEvents are the Job's Events' notes, newest last.
func jobEvents(ctx context.Context, job *batchv1.Job) string {
	var list eventsv1.EventList
	if err := env.Client.List(ctx, &list, client.InNamespace(job.Namespace)); err != nil {
		return err.Error()
	}
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "Job" && e.Regarding.Name == job.Name {
			notes = append(notes, e.Reason+": "+e.Note)
		}
	}
	return strings.Join(notes, " | ")
}
