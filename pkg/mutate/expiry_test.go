package mutate

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/decide"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// fakeJobs is a WorkloadReader over Jobs held by pointer, so a test can
// change a Job (or delete it, by emptying its name) after the handlers are made.
type fakeJobs []*batchv1.Job

func (f fakeJobs) PodTemplateOf(_ context.Context, namespace, kind, name string) (types.UID, map[string]string, bool, error) {
	for _, j := range f {
		if kind == "Job" && j.Namespace == namespace && j.Name == name {
			return j.UID, j.Spec.Template.Annotations, true, nil
		}
	}
	return "", nil, false, nil
}

// failingJobs is a WorkloadReader whose API server does not answer.
type failingJobs struct{}

func (failingJobs) PodTemplateOf(context.Context, string, string, string) (types.UID, map[string]string, bool, error) {
	return "", nil, false, errors.New("connection refused")
}

// jobPod is the pod the Job controller makes from job's template: named
// after the Job, controlled by it.
func jobPod(job *batchv1.Job) *corev1.Pod {
	p := TemplatePod(job.Namespace, "", job.Name+"-", &job.Spec.Template)
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: new(true), BlockOwnerDeletion: new(true)}}
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[batchv1.JobNameLabel] = job.Name
	return p
}

// clocked decides with eval on nodes, sealing with key1, at clk's time,
// reading Jobs from jobs.
func clocked(eval decide.Evaluator, clk *clocktesting.FakePassiveClock, jobs WorkloadReader, nodes ...corev1.Node) *Mutator {
	inv := StaticInventory{Inv: inventory.Build(nodes, allocator.Default())}
	return NewMutator(eval, inv, MutatorOptions{RecordKeys: record.KeySet{Current: key1}, Clock: clk, Workloads: jobs})
}

var t0 = time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)

// TestPodSealHoldsOnlyInTheReinvocationWindow: a pod's own seal is taken
// as it stands only within the seal window of its sealing, either way
// (the replica that checks may run behind the one that sealed): that is
// the API server reinvoking gpuadmit for the same request. Past it — a
// saved pod applied again after the policy gave the namespace another
// priority — the pod is decided again: refused where the decision
// changed, with what changed and under which revisions, and passed with a
// fresh seal where it did not.
func TestPodSealHoldsOnlyInTheReinvocationWindow(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	oldPolicy := tweakEval{rev: "git-old", tweak: func(d *policy.Decision) { d.PriorityClassName = "gpuadmit-inference" }}
	admitted := mustMutate(t, clocked(oldPolicy, clk, nil, h100Mixed), memPod()).Pod
	tests := map[string]struct {
		after  time.Duration
		policy decide.Evaluator
		// allow with resealed: passed with a new seal; allow alone: unchanged.
		allow, resealed bool
		want            []string
	}{
		"reinvoked at once under a new policy": {after: time.Second, policy: newPriority, allow: true},
		"reinvoked just inside the window":     {after: DefaultSealWindow, policy: newPriority, allow: true},
		"checked by a replica 30s behind":      {after: -30 * time.Second, policy: newPriority, allow: true},
		"applied again after the window, new policy": {after: DefaultSealWindow + 2*time.Second, policy: newPriority,
			want: []string{"sealed at 2026-11-27T09:00:00Z", "only within 1m30s of sealing", "policy revision git-new (it was git-old)",
				`/spec/priorityClassName: "gpuadmit-inference", now "gpuadmit-batch"`, "submit the pod as its author wrote it"}},
		"applied again a day later, same policy": {after: 24 * time.Hour, policy: oldPolicy, allow: true, resealed: true},
		"a seal from the future (clock skew beyond the window)": {after: -DefaultSealWindow - 2*time.Second, policy: newPriority,
			want: []string{"sealed at 2026-11-27T09:00:00Z", "-1m32s ago"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			clk.SetTime(t0.Add(tc.after))
			then := clocked(tc.policy, clk, nil, h100Mixed)
			res := mustMutate(t, then, admitted.DeepCopy())
			if res.Allowed != tc.allow {
				t.Fatalf("allowed %v, message %q; want %v", res.Allowed, res.Message, tc.allow)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Message, w) {
					t.Errorf("message does not say %q:\n%s", w, res.Message)
				}
			}
			if strings.Contains(res.Message, "cannot be set by hand") {
				t.Errorf("a genuine record decided differently is called forged: %s", res.Message)
			}
			switch {
			case tc.allow && !tc.resealed && len(res.Patch) != 0:
				t.Errorf("patch %v; want the pod unchanged", res.Patch)
			case tc.resealed:
				checkResealed(t, then, res)
				if got := sealTime(t, res.Pod); !got.Equal(clk.Now().Truncate(time.Second)) {
					t.Errorf("resealed at %s, want now (%s)", got, clk.Now())
				}
			}
		})
	}
}

// sealTime reads the sealing time from a pod's record.
func sealTime(t *testing.T, p *corev1.Pod) time.Time {
	t.Helper()
	var w record.Written
	if err := json.Unmarshal([]byte(p.Annotations[record.AnnotationWritten]), &w); err != nil {
		t.Fatal(err)
	}
	return time.Unix(w.SealedAt, 0)
}

// TestExpiredSealDeniedNowSaysSo: past the window, a pod whose recorded
// request the policy now denies is refused with that policy's reason.
func TestExpiredSealDeniedNowSaysSo(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	admitted := mustMutate(t, clocked(defaultEngine, clk, nil, h100Mixed), memPod()).Pod
	withdrawn := tweakEval{rev: "git-withdrawn", tweak: func(d *policy.Decision) { d.Deny = []string{"namespace ns may no longer use MIG"} }}
	clk.SetTime(t0.Add(time.Hour))
	res := mustMutate(t, clocked(withdrawn, clk, nil, h100Mixed), admitted.DeepCopy())
	if res.Allowed {
		t.Fatal("a saved pod the new policy denies was admitted")
	}
	for _, w := range []string{"1h0m0s ago", "policy revision git-withdrawn (it was sha256-", "namespace ns may no longer use MIG"} {
		if !strings.Contains(res.Message, w) {
			t.Errorf("message does not say %q:\n%s", w, res.Message)
		}
	}
}

// TestTemplateSealHoldsForTheWorkloadsPods: a Kueue Job's template is
// sealed for the Job when it is created; a policy change an hour later
// does not touch the pods the live Job owns, which pass unchanged. A pod
// that carries the template's record but is not that live Job's pod is
// decided again, and the changed policy refuses it.
func TestTemplateSealHoldsForTheWorkloadsPods(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	live := &batchv1.Job{}
	jobs := fakeJobs{live}
	tmplPod := TemplatePod("ns", "train", "", &hamiJob("q").Spec.Template)
	first := clocked(defaultEngine, clk, jobs, h100Mixed)
	res, err := first.Mutate(context.Background(), Request{Pod: tmplPod, Template: true, Workload: record.WorkloadRef{Kind: "Job", Name: "train"}})
	if err != nil || !res.Allowed {
		t.Fatalf("template: %v %s", err, res.Message)
	}
	*live = batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", UID: "uid-1"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{ObjectMeta: res.Pod.ObjectMeta, Spec: res.Pod.Spec}}}
	live.Spec.Template.Name, live.Spec.Template.Namespace, live.Spec.Template.GenerateName = "", "", ""
	clk.SetTime(t0.Add(time.Hour))
	then := clocked(newPriority, clk, jobs, h100Mixed)

	otherSeal := func(p *corev1.Pod) {
		pod := TemplatePod("ns", "train", "", &hamiJob("q").Spec.Template)
		r, _ := first.Mutate(context.Background(), Request{Pod: pod, Template: true, Workload: record.WorkloadRef{Kind: "Job", Name: "train"}})
		live.Spec.Template.Annotations = r.Pod.Annotations
	}
	tests := map[string]struct {
		edit     func(p *corev1.Pod)
		noReader bool
		allow    bool
		want     string
	}{
		"the live Job's pod": {allow: true},
		"a bare pod with the template's record": {edit: func(p *corev1.Pod) { p.OwnerReferences = nil },
			want: "the pod has no controller ownerReference"},
		"a pod of another Job": {edit: func(p *corev1.Pod) { p.OwnerReferences[0].Name = "other" },
			want: "the pod's controller is Job other"},
		"a pod owned by a Job of another group": {edit: func(p *corev1.Pod) { p.OwnerReferences[0].APIVersion = "example.com/v1" },
			want: "the pod's controller is Job train"},
		"a pod of the Job deleted and created again": {edit: func(p *corev1.Pod) { p.OwnerReferences[0].UID = "uid-0" },
			want: "is now another object (UID uid-1, the pod's ownerReference names uid-0)"},
		"the Job is gone": {edit: func(p *corev1.Pod) { live.Name = "" },
			want: "Job train does not exist"},
		"the live Job's template carries another seal": {edit: otherSeal,
			want: "carries another seal"},
		"a replica that reads no workloads": {noReader: true, want: "this replica reads no workloads"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			saved := *live.DeepCopy()
			defer func() { *live = saved }()
			p := jobPod(live)
			if tc.edit != nil {
				tc.edit(p)
			}
			m := then
			if tc.noReader {
				m = clocked(newPriority, clk, nil, h100Mixed)
			}
			res := mustMutate(t, m, p)
			if res.Allowed != tc.allow {
				t.Fatalf("allowed %v, message %q; want %v", res.Allowed, res.Message, tc.allow)
			}
			if tc.allow {
				if len(res.Patch) != 0 {
					t.Errorf("patch %v; want the Job's pod unchanged", res.Patch)
				}
				return
			}
			for _, w := range []string{"seal of Job/train's pod template", tc.want, "gpuadmit-batch"} {
				if !strings.Contains(res.Message, w) {
					t.Errorf("message does not say %q:\n%s", w, res.Message)
				}
			}
		})
	}

	p := jobPod(live)
	if _, err := clocked(newPriority, clk, failingJobs{}, h100Mixed).Mutate(context.Background(), Request{Pod: p}); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("an API error reading the Job: err = %v, want gpuadmit's own failure, not a decision", err)
	}
}

// TestTemplateSealAtTheWorkloadsCreate: the Job webhook sees its own seal
// again only on the reinvocation of the Job's CREATE, within the window
// and for the same Job. A saved Job created again later, or a sealed
// template copied into another Job, is decided again.
func TestTemplateSealAtTheWorkloadsCreate(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	train := record.WorkloadRef{Kind: "Job", Name: "train"}
	first := clocked(defaultEngine, clk, nil, h100Mixed)
	res, err := first.Mutate(context.Background(), Request{Pod: TemplatePod("ns", "train", "", &hamiJob("q").Spec.Template), Template: true, Workload: train})
	if err != nil || !res.Allowed {
		t.Fatalf("template: %v %s", err, res.Message)
	}
	sealedPod := func() *corev1.Pod {
		return TemplatePod("ns", "train", "", &corev1.PodTemplateSpec{ObjectMeta: res.Pod.ObjectMeta, Spec: res.Pod.Spec})
	}
	tests := map[string]struct {
		after time.Duration
		wl    record.WorkloadRef
		pod   func() *corev1.Pod
		allow bool
		want  string
	}{
		"reinvoked for the same Job":      {after: time.Second, wl: train, pod: sealedPod, allow: true},
		"created again after the window":  {after: time.Hour, wl: train, pod: sealedPod, want: "sealed at 2026-11-27T09:00:00Z"},
		"copied into another Job at once": {after: time.Second, wl: record.WorkloadRef{Kind: "Job", Name: "copy"}, pod: sealedPod, want: "was sealed for Job/train"},
		"a generated name is another Job": {after: time.Second, wl: record.WorkloadRef{Kind: "Job", GenerateName: "train-"}, pod: sealedPod, want: "was sealed for Job/train"},
		"a pod's seal copied into a template": {after: time.Second, wl: train, pod: func() *corev1.Pod {
			return mustMutate(t, first, memPod()).Pod
		}, want: "was sealed for a pod, not a workload"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			clk.SetTime(t0.Add(tc.after))
			res, err := clocked(newPriority, clk, nil, h100Mixed).Mutate(context.Background(), Request{Pod: tc.pod(), Template: true, Workload: tc.wl})
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed != tc.allow || (tc.allow && len(res.Patch) != 0) {
				t.Fatalf("allowed %v, patch %v, message %q; want allowed %v (unchanged)", res.Allowed, res.Patch, res.Message, tc.allow)
			}
			if !strings.Contains(res.Message, tc.want) {
				t.Errorf("message does not say %q:\n%s", tc.want, res.Message)
			}
		})
	}
}

// sealV1 seals pod as gpuadmit sealed before seals expired: format v1,
// no sealing time, no workload.
func sealV1(t *testing.T, namespace string, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	out := pod.DeepCopy()
	var w record.Written
	if err := json.Unmarshal([]byte(out.Annotations[record.AnnotationWritten]), &w); err != nil {
		t.Fatal(err)
	}
	w.SealedAt, w.Workload = 0, nil
	raw, _ := json.Marshal(w)
	out.Annotations[record.AnnotationWritten] = string(raw)
	// What a v1 MAC covers, as record.Seal encodes it.
	in := struct {
		Version   string            `json:"v"`
		Namespace string            `json:"ns"`
		Record    map[string]string `json:"record"`
	}{Version: "v1", Namespace: namespace, Record: map[string]string{}}
	for k, v := range out.Annotations {
		if record.IsOwnAnnotation(k) && k != record.AnnotationMAC {
			in.Record[k] = v
		}
	}
	b, _ := json.Marshal(in)
	h := hmac.New(sha256.New, key1)
	h.Write(b)
	out.Annotations[record.AnnotationMAC] = "v1:" + record.KeyID(key1) + ":" + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
	return out
}

// TestOlderSealsAcrossAnUpgrade: a v1 seal (no time, no workload) on a pod
// of a live Job whose template carries it passes as it stands, so Jobs
// admitted before the upgrade keep their pods; on any other pod it is
// decided again — passed with a v2 seal where nothing changed (a pod in
// flight across the upgrade), refused where the policy changed.
func TestOlderSealsAcrossAnUpgrade(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	first := clocked(defaultEngine, clk, nil, h100Mixed)
	v1Pod := sealV1(t, "ns", mustMutate(t, first, memPod()).Pod)

	res, err := first.Mutate(context.Background(), Request{Pod: TemplatePod("ns", "old", "", &hamiJob("q").Spec.Template), Template: true, Workload: record.WorkloadRef{Kind: "Job", Name: "old"}})
	if err != nil || !res.Allowed {
		t.Fatalf("template: %v %s", err, res.Message)
	}
	tmpl := sealV1(t, "ns", res.Pod)
	old := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: "ns", UID: "uid-old"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: tmpl.Labels, Annotations: tmpl.Annotations}, Spec: tmpl.Spec}}}
	jobs := fakeJobs{old}

	same := clocked(defaultEngine, clk, jobs, h100Mixed)
	if res := mustMutate(t, same, v1Pod.DeepCopy()); !res.Allowed {
		t.Errorf("a v1-sealed pod in flight, decision unchanged: refused: %s", res.Message)
	} else {
		checkResealed(t, same, res)
		if !strings.HasPrefix(res.Pod.Annotations[record.AnnotationMAC], "v2:") {
			t.Errorf("resealed as %q, want a v2 seal", res.Pod.Annotations[record.AnnotationMAC])
		}
	}
	changed := clocked(newPriority, clk, jobs, h100Mixed)
	if res := mustMutate(t, changed, v1Pod.DeepCopy()); res.Allowed || !strings.Contains(res.Message, "a gpuadmit release whose seals did not expire") {
		t.Errorf("a v1-sealed bare pod under a changed policy: allowed %v, message %q; want refused, saying why", res.Allowed, res.Message)
	}
	if res := mustMutate(t, changed, jobPod(old)); !res.Allowed || len(res.Patch) != 0 {
		t.Errorf("the pod of a Job sealed before the upgrade: allowed %v, patch %v, message %q; want it unchanged", res.Allowed, res.Patch, res.Message)
	}
}
