package deploy_test

import (
	"slices"
	"testing"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
)

// checkRecordPolicy: a ValidatingAdmissionPolicy, bound with Deny, guards
// gpuadmit's record on UPDATE of pods and pods/status; it runs in the API
// server, so nothing depends on gpuadmit being up. Its CEL is evaluated on
// the updates it must allow and refuse (plain CEL with object and oldObject
// dynamic: the API server's typed environment is met in test/e2e).
func checkRecordPolicy(t *testing.T, objs objects) {
	t.Helper()
	vap := denyingPolicy(t, objs, "gpuadmit-record")
	rules := vap.Spec.MatchConstraints.ResourceRules
	if len(rules) != 1 || !slices.Equal(rules[0].Operations, []admissionregistrationv1.OperationType{admissionregistrationv1.Update}) ||
		!slices.Equal(rules[0].Resources, []string{"pods", "pods/status"}) || !slices.Equal(rules[0].APIGroups, []string{""}) {
		t.Errorf("resourceRules = %+v, want UPDATE of core pods and pods/status", rules)
	}
	matches := make([]admissionregistrationv1.MatchCondition, len(vap.Spec.MatchConditions))
	for i, m := range vap.Spec.MatchConditions {
		matches[i] = admissionregistrationv1.MatchCondition{Name: m.Name, Expression: m.Expression}
	}
	checkMatchConditions(t, matches, recordSent)
	checkValidations(t, vap.Spec.Validations, recordAllowed)
}

// recordSent: an UPDATE is evaluated when either side carries a gpuadmit.io/ annotation.
var recordSent = map[string]celCase{
	"no gpuadmit annotations":   {object: pod(annotation("team", "a")), oldObject: pod(), want: false},
	"a record added":            {object: pod(annotation("gpuadmit.io/decision", "x")), oldObject: pod(), want: true},
	"a record removed":          {object: pod(), oldObject: pod(annotation("gpuadmit.io/decision", "x")), want: true},
	"a record kept, labels set": {object: pod(annotation("gpuadmit.io/decision", "x")), oldObject: pod(annotation("gpuadmit.io/decision", "x")), want: true},
}

func recorded(more ...func(*corev1.Pod)) *corev1.Pod {
	return pod(append([]func(*corev1.Pod){annotation("gpuadmit.io/decision", "main: 1g.10gb"), annotation("gpuadmit.io/request", "{}"), annotation("gpuadmit.io/class", "training")}, more...)...)
}

func finalizer(f string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Finalizers = append(p.Finalizers, f) }
}

func label(k, v string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Labels = map[string]string{k: v} }
}

// recordAllowed: want is whether the update passes every validation.
var recordAllowed = map[string]celCase{
	"a label added":                         {object: recorded(label("team", "a")), oldObject: recorded(), want: true},
	"the tracking finalizer gone":           {object: recorded(), oldObject: recorded(finalizer("batch.kubernetes.io/job-tracking")), want: true},
	"another annotation added":              {object: recorded(annotation("team", "a")), oldObject: recorded(), want: true},
	"a user hint changed":                   {object: recorded(annotation("gpuadmit.io/class", "batch")), oldObject: recorded(), want: true},
	"the decision edited":                   {object: recorded(annotation("gpuadmit.io/decision", "main: 8 GPUs")), oldObject: recorded(), want: false},
	"the request record removed":            {object: recorded(func(p *corev1.Pod) { delete(p.Annotations, "gpuadmit.io/request") }), oldObject: recorded(), want: false},
	"every annotation removed":              {object: pod(), oldObject: recorded(), want: false},
	"a record added to a plain pod":         {object: pod(annotation("gpuadmit.io/decision", "forged")), oldObject: pod(), want: false},
	"a record value emptied":                {object: recorded(annotation("gpuadmit.io/decision", "")), oldObject: recorded(), want: false},
	"the managed label kept, another added": {object: recorded(withLabels("gpuadmit.io/managed", "true", "team", "a")), oldObject: recorded(withLabels("gpuadmit.io/managed", "true")), want: true},
	"the managed label removed":             {object: recorded(withLabels("team", "a")), oldObject: recorded(withLabels("gpuadmit.io/managed", "true")), want: false},
	"the managed label changed":             {object: recorded(withLabels("gpuadmit.io/managed", "false")), oldObject: recorded(withLabels("gpuadmit.io/managed", "true")), want: false},
	"a pod an older gpuadmit admitted":      {object: recorded(withLabels("team", "a")), oldObject: recorded(), want: true},
}

// withLabels sets the pod's labels to the key/value pairs kv.
func withLabels(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

// checkValidations compiles each validation like checkMatchConditions does
// and evaluates them on each case: an update passes when all hold.
func checkValidations(t *testing.T, vs []admissionregistrationv1.Validation, cases map[string]celCase) {
	t.Helper()
	env, err := cel.NewEnv(cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	var prgs []cel.Program
	for i, v := range vs {
		ast, iss := env.Compile(v.Expression)
		if iss.Err() != nil {
			t.Fatalf("validation %d: %v", i, iss.Err())
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		prgs = append(prgs, prg)
	}
	for name, tc := range cases {
		vars := map[string]any{"object": unstructured(t, tc.object), "oldObject": unstructured(t, tc.oldObject)}
		got := true
		for i, prg := range prgs {
			out, _, err := prg.Eval(vars)
			if err != nil {
				t.Fatalf("%s: validation %d: %v", name, i, err)
			}
			got = got && out.Value() == true
		}
		if got != tc.want {
			t.Errorf("%s: allowed = %v, want %v", name, got, tc.want)
		}
	}
}

// denyingPolicy is the ValidatingAdmissionPolicy called name, checked to be
// bound under the same name with Deny and to fail closed (failurePolicy
// Fail), as each of gpuadmit's own policies is.
func denyingPolicy(t *testing.T, objs objects, name string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	vap := get[*admissionregistrationv1.ValidatingAdmissionPolicy](t, objs, "ValidatingAdmissionPolicy", "", name)
	b := get[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, objs, "ValidatingAdmissionPolicyBinding", "", name)
	if b.Spec.PolicyName != vap.Name || !slices.Equal(b.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) {
		t.Errorf("binding %s: policy %q, actions %v; want %s with [Deny]", b.Name, b.Spec.PolicyName, b.Spec.ValidationActions, vap.Name)
	}
	if p := vap.Spec.FailurePolicy; p == nil || *p != admissionregistrationv1.Fail {
		t.Errorf("failurePolicy = %s, want Fail", show(p))
	}
	return vap
}
