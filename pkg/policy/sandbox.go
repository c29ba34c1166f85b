package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Capabilities are what a policy set may use: this OPA's builtins less
// every one OPA marks nondeterministic (http.send, net.lookup_ip_addr,
// opa.runtime, time.now_ns, rand.intn, uuid.rfc4122, the io.jwt signing
// and verifying builtins, …), and no network for the type checker's remote
// schemas. A decision then depends on its input and the set alone: it can
// be memoized, it costs no round trip on the admission path, and it sends
// nothing from the webhook's network position. The list is computed, so a
// builtin a new OPA adds and marks nondeterministic is refused too. The
// time, where a set needs it, comes as input.now (Input.Now). Each call
// returns a new value, which the caller may keep.
func Capabilities() *ast.Capabilities {
	caps := ast.CapabilitiesForThisVersion()
	caps.Builtins = slices.DeleteFunc(caps.Builtins, func(b *ast.Builtin) bool { return b.Nondeterministic })
	caps.AllowNet = []string{} // empty, not nil: no host at all
	return caps
}

// RefusedBuiltins names the builtins of this OPA that Capabilities leaves
// out, sorted.
func RefusedBuiltins() []string {
	var names []string
	for _, b := range ast.Builtins {
		if b.Nondeterministic {
			names = append(names, b.Name)
		}
	}
	slices.Sort(names)
	return names
}

// newCompiler is the compiler every set is compiled and tested with.
func newCompiler() *ast.Compiler {
	return ast.NewCompiler().WithDefaultRegoVersion(ast.RegoV1).WithCapabilities(Capabilities())
}

// RefusedError is Compile's error for a set whose rules call builtins that
// Capabilities leaves out.
type RefusedError struct {
	Calls []RefusedCall
	// Other are the compiler's errors that are not refusals; often none.
	Other ast.Errors
}

// RefusedCall is one call of a refused builtin.
type RefusedCall struct {
	Builtin string
	// Rule is the rule that calls it (data.gpuadmit.warnings); empty when
	// the call is in no rule the set's source shows.
	Rule string
	// At is where: file:line.
	At string
}

func (e *RefusedError) Error() string {
	calls := make([]string, len(e.Calls))
	for i, c := range e.Calls {
		calls[i] = c.Builtin
		if c.Rule != "" {
			calls[i] += " in rule " + c.Rule
		}
		calls[i] += " at " + c.At
	}
	msg := fmt.Sprintf("the set calls builtins that policies may not use: %s. Policies are sandboxed: no network, "+
		"no runtime, no clock and no randomness, so a decision depends only on its input; a policy that "+
		"needs the time reads input.now (see data.gpuadmit.config.nowGranularity)", strings.Join(calls, "; "))
	if len(e.Other) > 0 {
		msg += "; also: " + e.Other.Error()
	}
	return msg
}

// refusals turns the compiler's errors about refused builtins — a call of
// one is an undefined function, a with modifier that replaces one has no
// target — into a *RefusedError; nil when there are none.
func refusals(errs ast.Errors, modules map[string]*ast.Module) error {
	refused := map[string]bool{}
	for _, name := range RefusedBuiltins() {
		refused[name] = true
	}
	out := &RefusedError{}
	for _, e := range errs {
		name, ok := strings.CutPrefix(e.Message, "undefined function ")
		if !ok && strings.HasPrefix(e.Message, "with keyword target") && e.Location != nil {
			name = string(e.Location.Text)
		}
		if !refused[name] || e.Location == nil {
			out.Other = append(out.Other, e)
			continue
		}
		out.Calls = append(out.Calls, RefusedCall{Builtin: name, Rule: ruleAt(modules, e.Location.File, e.Location.Row),
			At: fmt.Sprintf("%s:%d", e.Location.File, e.Location.Row)})
	}
	if len(out.Calls) == 0 {
		return nil
	}
	return out
}

// ruleAt names the rule of file whose source holds row: the last rule that
// starts at or before it (rules do not nest).
func ruleAt(modules map[string]*ast.Module, file string, row int) string {
	var found *ast.Rule
	var pkg ast.Ref
	for _, m := range modules {
		for _, r := range m.Rules {
			if r.Location == nil || r.Location.File != file || r.Location.Row > row {
				continue
			}
			if found == nil || r.Location.Row > found.Location.Row {
				found, pkg = r, m.Package.Path
			}
		}
	}
	if found == nil {
		return ""
	}
	return pkg.Extend(found.Head.Ref().GroundPrefix()).String()
}
