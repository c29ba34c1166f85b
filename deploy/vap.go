package deploy

import (
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/ext"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// VAPEvaluator runs a ValidatingAdmissionPolicy's CEL in the API server's
// order, with plain cel-go and untyped objects, for the manifests' tests:
// match conditions, then variables in order, then validations. The API
// server's typed environment is met in the end-to-end tests.
type VAPEvaluator struct {
	vap      *admissionregistrationv1.ValidatingAdmissionPolicy
	programs map[string]cel.Program // by expression
}

// NewVAPEvaluator compiles every expression of vap; one that does not
// compile is an error.
func NewVAPEvaluator(vap *admissionregistrationv1.ValidatingAdmissionPolicy) (*VAPEvaluator, error) {
	env, err := cel.NewEnv(cel.OptionalTypes(), ext.Strings(),
		cel.Variable("request", cel.DynType), cel.Variable("object", cel.DynType),
		cel.Variable("oldObject", cel.DynType), cel.Variable("variables", cel.MapType(cel.StringType, cel.DynType)))
	if err != nil {
		return nil, fmt.Errorf("CEL environment: %w", err)
	}
	var exprs []string
	for _, mc := range vap.Spec.MatchConditions {
		exprs = append(exprs, mc.Expression)
	}
	for _, v := range vap.Spec.Variables {
		exprs = append(exprs, v.Expression)
	}
	for _, v := range vap.Spec.Validations {
		exprs = append(exprs, v.Expression)
		if v.MessageExpression != "" {
			exprs = append(exprs, v.MessageExpression)
		}
	}
	e := &VAPEvaluator{vap: vap, programs: map[string]cel.Program{}}
	for _, expr := range exprs {
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			return nil, fmt.Errorf("policy %s: compile %q: %w", vap.Name, expr, iss.Err())
		}
		if e.programs[expr], err = env.Program(ast); err != nil {
			return nil, fmt.Errorf("policy %s: %q: %w", vap.Name, expr, err)
		}
	}
	return e, nil
}

// Admit returns "" when the policy lets the request through, else the
// message of the first validation that fails (its messageExpression's, or
// its message), or the evaluation error that the API server, with
// failurePolicy Fail, also refuses on.
func (e *VAPEvaluator) Admit(req, object, oldObject any) string {
	in := map[string]any{"request": req, "object": object, "oldObject": oldObject}
	for _, mc := range e.vap.Spec.MatchConditions {
		if ok, err := e.eval(mc.Expression, in); err != nil || ok != true {
			return ""
		}
	}
	vars := map[string]any{}
	in["variables"] = vars
	for _, v := range e.vap.Spec.Variables {
		out, err := e.eval(v.Expression, in)
		if err != nil {
			return "variable " + v.Name + ": " + err.Error()
		}
		vars[v.Name] = out
	}
	for _, v := range e.vap.Spec.Validations {
		ok, err := e.eval(v.Expression, in)
		if err != nil {
			return err.Error()
		}
		if ok == true {
			continue
		}
		if v.MessageExpression == "" {
			return v.Message
		}
		msg, err := e.eval(v.MessageExpression, in)
		if err != nil {
			return "messageExpression: " + err.Error()
		}
		s, _ := msg.(string)
		return s
	}
	return ""
}

func (e *VAPEvaluator) eval(expr string, in map[string]any) (any, error) {
	out, _, err := e.programs[expr].Eval(in)
	if err != nil {
		return nil, err
	}
	return out.Value(), nil
}
