package mutate

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

// kueueHandlers are the pod and Job handlers of one replica that seals its
// records, on the example nodes, for the example namespace team-a, reading
// Jobs from jobs (none where it is nil).
func kueueHandlers(t *testing.T, jobs ...*batchv1.Job) (*Handler, *JobHandler) {
	t.Helper()
	s := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(s))
	utilruntime.Must(batchv1.AddToScheme(s))
	m := NewMutator(defaultEngine, StaticInventory{Inv: exampleInventory(t)}, MutatorOptions{RecordKeys: record.KeySet{Current: key1}, Workloads: fakeJobs(jobs)})
	pods := NewHandler(m, teamA(t), s, HandlerOptions{})
	return pods, NewJobHandler(pods)
}

// hamiJob is a Job in team-a whose template asks in HAMi's dialect for a
// GPU with 3000 MiB, in Kueue's queue when queue is not empty.
func hamiJob(queue string) *batchv1.Job {
	j := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "team-a"},
		Spec: batchv1.JobSpec{Suspend: new(true), Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "train"}},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
				Name: "infer", Image: "busybox",
				Resources: corev1.ResourceRequirements{Limits: list(map[string]string{
					"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000", "nvidia.com/gpucores": "30"})},
			}}},
		}},
	}
	if queue != "" {
		j.Labels = map[string]string{LabelKueueQueue: queue}
	}
	return j
}

func jobReview(t *testing.T, j *batchv1.Job) (admission.Request, []byte) {
	t.Helper()
	raw, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "job-1", Kind: metav1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"},
		Resource:  metav1.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"},
		Namespace: j.Namespace, Name: j.Name, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
	}}, raw
}

// applied is the Job after the response's patch.
func applied(t *testing.T, raw []byte, resp admission.Response) *batchv1.Job {
	t.Helper()
	j := &batchv1.Job{}
	if err := json.Unmarshal(patched(t, raw, resp.Patch), j); err != nil {
		t.Fatal(err)
	}
	return j
}

// TestKueueJobTemplateIsDecided: a Job in a Kueue queue gets the decision in
// its pod template, so Kueue counts the GPU its pods get; the pods the Job
// controller then makes (with Kueue's podset label and its flavor's node
// labels added) pass the pod webhook unchanged.
func TestKueueJobTemplateIsDecided(t *testing.T) {
	live := &batchv1.Job{}
	pods, jobs := kueueHandlers(t, live)
	ctx := context.Background()
	req, raw := jobReview(t, hamiJob("team-a-queue"))
	resp := jobs.Handle(ctx, req)
	if !resp.Allowed || len(patchOps(t, resp)) == 0 {
		t.Fatalf("the Kueue Job's template was not rewritten: allowed %v, %d patch operations, %v", resp.Allowed, len(patchOps(t, resp)), resp.Result)
	}
	for _, op := range patchOps(t, resp) {
		if !strings.HasPrefix(op.Path, JobTemplatePath+"/") {
			t.Errorf("patch operation %s %s is outside the Job's pod template", op.Operation, op.Path)
		}
	}
	job := applied(t, raw, resp)
	tc := job.Spec.Template.Spec.Containers[0]
	if got := gpuResources(tc); got["nvidia.com/gpumem"] != "" || got["nvidia.com/gpucores"] != "" || len(got) == 0 {
		t.Errorf("the template still asks in HAMi's dialect, or for no GPU: %v", got)
	}
	if len(accountingResources(tc)) == 0 {
		t.Errorf("the template has no accounting resources: Kueue would not count GPU memory")
	}
	if job.Spec.Template.Annotations[record.AnnotationMAC] == "" || job.Spec.Template.Annotations[record.AnnotationDecision] == "" {
		t.Errorf("the template carries no sealed record: %v", job.Spec.Template.Annotations)
	}

	// The Job controller's pod, once Kueue started the Job.
	job.UID = "job-uid-1"
	*live = *job
	pod := jobPod(job)
	pod.Labels[LabelKueuePodSet] = "main"
	if pod.Spec.NodeSelector == nil {
		pod.Spec.NodeSelector = map[string]string{}
	}
	pod.Spec.NodeSelector["flavor.example.com/pool"] = "a100"
	res, err := pods.m.Mutate(ctx, Request{Pod: pod, Namespace: teamA(t)["team-a"]})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Allowed || len(res.Patch) != 0 {
		t.Errorf("the pod of the decided template does not pass unchanged: allowed %v, message %q, patch %v", res.Allowed, res.Message, res.Patch)
	}
}

func TestKueueJobHandlerLeavesOtherJobs(t *testing.T) {
	_, jobs := kueueHandlers(t)
	ctx := context.Background()

	req, _ := jobReview(t, hamiJob(""))
	if resp := jobs.Handle(ctx, req); !resp.Allowed || len(patchOps(t, resp)) != 0 {
		t.Errorf("a Job in no Kueue queue was changed: allowed %v, %d operations", resp.Allowed, len(patchOps(t, resp)))
	}
	child := hamiJob("q")
	child.OwnerReferences = []metav1.OwnerReference{{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "js", UID: "u1", Controller: new(true)}}
	req, _ = jobReview(t, child)
	if resp := jobs.Handle(ctx, req); !resp.Allowed || len(patchOps(t, resp)) != 0 {
		t.Errorf("a JobSet's child Job was changed behind the JobSet's Kueue workload: allowed %v, %d operations", resp.Allowed, len(patchOps(t, resp)))
	}
	cron := hamiJob("q")
	cron.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: "nightly", UID: "u2", Controller: new(true)}}
	req, _ = jobReview(t, cron)
	if resp := jobs.Handle(ctx, req); !resp.Allowed || len(patchOps(t, resp)) == 0 {
		t.Errorf("a CronJob's Job in a Kueue queue was not decided: allowed %v, %d operations", resp.Allowed, len(patchOps(t, resp)))
	}
	req, _ = jobReview(t, hamiJob("q"))
	req.Operation = admissionv1.Update
	if resp := jobs.Handle(ctx, req); !resp.Allowed || len(patchOps(t, resp)) != 0 {
		t.Errorf("an UPDATE of a Kueue Job was changed: allowed %v, %d operations", resp.Allowed, len(patchOps(t, resp)))
	}
	req, _ = jobReview(t, hamiJob("q"))
	req.Kind = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	if resp := jobs.Handle(ctx, req); resp.Allowed || resp.Result.Code != 400 {
		t.Errorf("a review of a Pod sent to the Job webhook was not refused as a bad request: %+v", resp.Result)
	}
}

func TestKueueJobTemplateDenialNamesTheTemplate(t *testing.T) {
	_, jobs := kueueHandlers(t)
	j := hamiJob("q")
	j.Spec.Template.Spec.Containers[0].Resources.Limits = list(map[string]string{"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "150"})
	req, _ := jobReview(t, j)
	resp := jobs.Handle(context.Background(), req)
	if resp.Allowed {
		t.Fatal("a template asking for 150% of a GPU was admitted")
	}
	if msg := resp.Result.Message; !strings.HasPrefix(msg, "spec.template: ") || !strings.Contains(msg, "infer") {
		t.Errorf("the denial does not name the template and its container: %q", msg)
	}
}

// TestKueuePodsMustArriveAsTheyRun: a pod of a workload Kueue admitted from
// a template gpuadmit did not decide (a JobSet, say) is refused when
// gpuadmit would give it other GPU than the template asked for, and passes
// when it asks for what it gets.
func TestKueuePodsMustArriveAsTheyRun(t *testing.T) {
	pods, _ := kueueHandlers(t)
	ctx := context.Background()
	ns := teamA(t)["team-a"]
	asked := TemplatePod("team-a", "js", "", &hamiJob("").Spec.Template)
	asked.Labels[LabelKueuePodSet] = "workers"
	res, err := pods.m.Mutate(ctx, Request{Pod: asked, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	if res.Allowed {
		t.Fatalf("a Kueue pod asking in HAMi's dialect was rewritten behind Kueue's count: %v", res.Pod.Spec.Containers[0].Resources.Limits)
	}
	for _, want := range []string{`container "infer"`, "nvidia.com/gpumem: 3000", "Kueue", "pod template"} {
		if !strings.Contains(res.Message, want) {
			t.Errorf("the denial does not say %q: %s", want, res.Message)
		}
	}

	// The same pod without Kueue's label is rewritten; written as that
	// rewrite asks, the Kueue pod passes.
	plain := asked.DeepCopy()
	delete(plain.Labels, LabelKueuePodSet)
	free, err := pods.m.Mutate(ctx, Request{Pod: plain, Namespace: ns})
	if err != nil || !free.Allowed {
		t.Fatalf("the pod outside Kueue is not admitted: %v %s", err, free.Message)
	}
	final := asked.DeepCopy()
	final.Spec.Containers[0].Resources = *free.Pod.Spec.Containers[0].Resources.DeepCopy()
	for k := range final.Spec.Containers[0].Resources.Limits {
		if strings.HasPrefix(string(k), "gpuadmit.io/") {
			delete(final.Spec.Containers[0].Resources.Limits, k)
			delete(final.Spec.Containers[0].Resources.Requests, k)
		}
	}
	res, err = pods.m.Mutate(ctx, Request{Pod: final, Namespace: ns})
	if err != nil || !res.Allowed {
		t.Errorf("a Kueue pod asking for what gpuadmit gives is refused: %v %s", err, res.Message)
	}
}
