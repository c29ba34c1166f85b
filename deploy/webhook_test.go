package deploy_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// webhookCommon are a webhook's settings, as their Go fields.
type webhookCommon struct {
	name     string
	versions []string
	client   admissionregistrationv1.WebhookClientConfig
	rules    []admissionregistrationv1.RuleWithOperations
	failure  *admissionregistrationv1.FailurePolicyType
	side     *admissionregistrationv1.SideEffectClass
	timeout  *int32
	nsSel    *metav1.LabelSelector
	matches  []admissionregistrationv1.MatchCondition
}

func checkWebhooks(t *testing.T, objs objects) {
	t.Helper()
	m := get[*admissionregistrationv1.MutatingWebhookConfiguration](t, objs, "MutatingWebhookConfiguration", "", "gpuadmit")
	if len(m.Webhooks) != 2 {
		t.Fatalf("MutatingWebhookConfiguration has %d webhooks, want 2 (pods, and Jobs in a Kueue queue)", len(m.Webhooks))
	}
	for _, mw := range m.Webhooks {
		if mw.ReinvocationPolicy == nil || *mw.ReinvocationPolicy != admissionregistrationv1.IfNeededReinvocationPolicy {
			t.Errorf("%s reinvocationPolicy = %s, want IfNeeded", mw.Name, show(mw.ReinvocationPolicy))
		}
	}
	mw := m.Webhooks[0]
	checkWebhook(t, objs, webhookCommon{mw.Name, mw.AdmissionReviewVersions, mw.ClientConfig, mw.Rules, mw.FailurePolicy,
		mw.SideEffects, mw.TimeoutSeconds, mw.NamespaceSelector, mw.MatchConditions},
		"pods.mutate.gpuadmit.io", "/mutate-v1-pod", rulesFor("", "pods"))
	checkMatchConditions(t, mw.MatchConditions, mutateCases)
	if mw.ObjectSelector != nil && (len(mw.ObjectSelector.MatchLabels) > 0 || len(mw.ObjectSelector.MatchExpressions) > 0) {
		t.Errorf("the pod webhook has an objectSelector %+v: pods could leave gpuadmit by their labels", mw.ObjectSelector)
	}
	jw := m.Webhooks[1]
	checkWebhook(t, objs, webhookCommon{jw.Name, jw.AdmissionReviewVersions, jw.ClientConfig, jw.Rules, jw.FailurePolicy,
		jw.SideEffects, jw.TimeoutSeconds, jw.NamespaceSelector, jw.MatchConditions},
		"kueue-jobs.mutate.gpuadmit.io", "/mutate-batch-v1-job", rulesFor("batch", "jobs"))
	checkMatchConditions(t, jw.MatchConditions, jobCases())
	want := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "kueue.x-k8s.io/queue-name", Operator: metav1.LabelSelectorOpExists}}}
	if !cmp.Equal(jw.ObjectSelector, want) {
		t.Errorf("the Job webhook's objectSelector = %+v, want Jobs with Kueue's queue label", jw.ObjectSelector)
	}
	for k := range objs {
		if k.Kind == "ValidatingWebhookConfiguration" {
			t.Errorf("%s is rendered: gpuadmit's record is guarded by a ValidatingAdmissionPolicy, with no webhook to be down", k)
		}
	}
	checkRecordPolicy(t, objs)
}

// checkWebhook: Fail (only matched pods reach it), no side effects, a short
// timeout, pods on op only, the Service's HTTPS port, and gpuadmit's own
// namespace and kube-system excluded.
func checkWebhook(t *testing.T, objs objects, w webhookCommon, name, path string, wantRules []admissionregistrationv1.RuleWithOperations) {
	t.Helper()
	if w.name != name {
		t.Errorf("webhook name = %q, want %q", w.name, name)
	}
	if w.failure == nil || *w.failure != admissionregistrationv1.Fail {
		t.Errorf("%s failurePolicy = %s, want Fail", name, show(w.failure))
	}
	if w.side == nil || *w.side != admissionregistrationv1.SideEffectClassNone {
		t.Errorf("%s sideEffects = %s, want None", name, show(w.side))
	}
	if w.timeout == nil || *w.timeout < 1 || *w.timeout > 5 {
		t.Errorf("%s timeoutSeconds = %s, want 1 to 5", name, show(w.timeout))
	}
	if !slices.Equal(w.versions, []string{"v1"}) {
		t.Errorf("%s admissionReviewVersions = %v, want [v1]", name, w.versions)
	}
	if !cmp.Equal(w.rules, wantRules) {
		t.Errorf("%s rules = %+v, want %+v", name, w.rules, wantRules)
	}
	s := w.client.Service
	if w.client.URL != nil || s == nil || s.Name != serviceName || s.Namespace != namespace || s.Path == nil || *s.Path != path || s.Port == nil || *s.Port != 443 {
		t.Errorf("%s clientConfig = %+v, want Service %s/%s port 443 path %s", name, w.client, namespace, serviceName, path)
	}
	if len(w.matches) == 0 {
		t.Errorf("%s has no matchConditions: failurePolicy Fail would apply to every pod", name)
	}
	excluded := map[string]bool{}
	if w.nsSel != nil {
		for _, e := range w.nsSel.MatchExpressions {
			if e.Key == corev1.LabelMetadataName && e.Operator == metav1.LabelSelectorOpNotIn {
				for _, v := range e.Values {
					excluded[v] = true
				}
			}
		}
	}
	if !excluded[namespace] || !excluded["kube-system"] {
		t.Errorf("%s namespaceSelector = %+v, want %s NotIn [%s kube-system]", name, w.nsSel, corev1.LabelMetadataName, namespace)
	}
}

// rulesFor is CREATE of a namespaced resource in group's v1.
func rulesFor(group, resource string) []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: []string{resource}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
	}}
}

// jobCases are mutateCases with each pod as a Job's pod template: the Job
// webhook sends what the pod webhook would send of its pods.
func jobCases() map[string]celCase {
	out := map[string]celCase{}
	for name, c := range mutateCases {
		p := c.object.(*corev1.Pod)
		out[name+", in a Job's template"] = celCase{object: &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: p.Namespace, Labels: map[string]string{"kueue.x-k8s.io/queue-name": "q"}},
			Spec:       batchv1.JobSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: p.Annotations}, Spec: p.Spec}},
		}, want: c.want}
	}
	return out
}

// celCase is an admission request that a webhook's matchConditions must
// send (want true) or leave alone (want false).
type celCase struct {
	object, oldObject runtime.Object
	want              bool
}

func pod(mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "team-a"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func limit(name string, q string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceName(name): resource.MustParse(q)}
	}
}

func request(name string, q string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceName(name): resource.MustParse(q)}
	}
}

func initLimit(name string, q string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "init", Image: "busybox",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceName(name): resource.MustParse(q)}}})
	}
}

func annotation(k, v string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}

// mutateCases: every GPU dialect reaches the mutating webhook, nothing else does.
var mutateCases = map[string]celCase{
	"a pod without GPU":            {object: pod(limit("cpu", "1"), annotation("team", "a")), want: false},
	"another vendor's GPU":         {object: pod(limit("amd.com/gpu", "1")), want: false},
	"another extended resource":    {object: pod(limit("example.com/fpga", "1")), want: false},
	"NVIDIA whole GPUs":            {object: pod(limit("nvidia.com/gpu", "2")), want: true},
	"a MIG profile, requests only": {object: pod(request("nvidia.com/mig-1g.10gb", "1")), want: true},
	"HAMi memory":                  {object: pod(limit("nvidia.com/gpumem", "3000")), want: true},
	"gpushare":                     {object: pod(limit("aliyun.com/gpu-mem", "4")), want: true},
	"Volcano in an init container": {object: pod(initLimit("volcano.sh/vgpu-number", "1")), want: true},
	"native fraction":              {object: pod(limit("gpuadmit.io/gpu", "500m")), want: true},
	"KAI fraction":                 {object: pod(annotation("gpu-fraction", "0.5")), want: true},
	"KAI memory":                   {object: pod(annotation("gpu-memory", "4000")), want: true},
	"a forged gpuadmit.io record":  {object: pod(annotation("gpuadmit.io/decision", "forged")), want: true},
	// Every DeviceClass is also an extended resource (KEP-5004); the webhook
	// decides gpuadmit's classes and passes other drivers' through.
	"gpuadmit's class by its implicit name":        {object: pod(limit("deviceclass.resource.kubernetes.io/gpu.gpuadmit.io", "8")), want: true},
	"a share class by its implicit name, requests": {object: pod(request("deviceclass.resource.kubernetes.io/gpu-share.gpuadmit.io", "1")), want: true},
	"a MIG class by its implicit name, init":       {object: pod(initLimit("deviceclass.resource.kubernetes.io/mig-1g.5gb.gpuadmit.io", "1")), want: true},
	"another driver's class by its implicit name":  {object: pod(limit("deviceclass.resource.kubernetes.io/fpga.example.com", "1")), want: true},
	"a pod without containers field":               {object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "i"}}}}, want: false},
}

// checkMatchConditions compiles the matchConditions with CEL's standard
// library, which is all they use, declaring object and oldObject as the API
// server does (dynamic, from the object's unstructured form, null when
// absent), and evaluates them on each case. All conditions must hold for a
// request to be sent.
func checkMatchConditions(t *testing.T, conds []admissionregistrationv1.MatchCondition, cases map[string]celCase) {
	t.Helper()
	env, err := cel.NewEnv(cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	var prgs []cel.Program
	for _, c := range conds {
		ast, iss := env.Compile(c.Expression)
		if iss.Err() != nil {
			t.Fatalf("matchCondition %s: %v", c.Name, iss.Err())
		}
		if ast.OutputType() != cel.BoolType {
			t.Fatalf("matchCondition %s returns %v, want bool", c.Name, ast.OutputType())
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		prgs = append(prgs, prg)
	}
	for name, tc := range cases {
		vars := map[string]any{"object": unstructured(t, tc.object), "oldObject": nil}
		if tc.oldObject != nil {
			vars["oldObject"] = unstructured(t, tc.oldObject)
		}
		got := true
		for i, prg := range prgs {
			out, _, err := prg.Eval(vars)
			if err != nil {
				t.Fatalf("%s: matchCondition %s: %v", name, conds[i].Name, err)
			}
			got = got && out.Value() == true
		}
		if got != tc.want {
			t.Errorf("%s: matched = %v, want %v", name, got, tc.want)
		}
	}
}

func unstructured(t *testing.T, obj runtime.Object) map[string]any {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// show prints what a pointer field holds, or that it is unset.
func show[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}
