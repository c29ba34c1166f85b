package policy

import (
	"reflect"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// PodReads is what a policy set's rules can read of input.pod, found in
// their source: a decision depends on no other part of the pod's view, so
// pods that differ only elsewhere (labels the policy never reads, an
// annotation another tool sets per pod, the node affinity of a
// DaemonSet's pods where no rule reads affinity) get the same decision, and the
// decision memo keys them alike (KeyView). The reading is conservative:
// wherever the rules use input.pod in a way other than a constant path
// (a variable key, input.pod passed whole to a function, an alias of
// input), the whole of what lies below counts as read. The zero PodReads
// reads all of the pod: a Set not made by Compile keys every pod whole.
type PodReads struct {
	// Partial: the rules read only the parts below; false, all of input.pod.
	Partial bool
	// Metadata: any of input.pod.metadata, labels and annotations included.
	Metadata bool
	// Labels and Annotations: the keys read, or All.
	Labels, Annotations KeysRead
	// Spec: the fields of input.pod.spec read (a field is read whole, its
	// own fields included), or All.
	Spec KeysRead
}

// KeysRead is the keys of a map the rules read: all of them, or Names.
type KeysRead struct {
	All   bool
	Names map[string]bool
}

// inputReads is what a set's rules read of input: of its pod, and whether
// input.now (or may: input whole, or under a key not constant, or an alias).
type inputReads struct {
	pod PodReads
	now bool
}

// readsOf finds what the modules' rules read of input.pod and whether they
// read input.now, test rules
// included (a decision could call one). The target of a with modifier
// (`with input as …`, as tests write) is not a read of it: only its value
// is walked. object.get is read as the builtin only where no rule, import
// or with modifier can stand in for it (objectShadowed).
func readsOf(modules map[string]*ast.Module) inputReads {
	r := inputReads{pod: PodReads{Partial: true}}
	builtinGet := !objectShadowed(modules)
	var vis *ast.GenericVisitor
	vis = ast.NewGenericVisitor(func(x any) bool {
		switch t := x.(type) {
		case *ast.Head:
			// A rule's ref head (a.b[input.pod…] := …) is not walked by the
			// visitor; its key and value are.
			for _, term := range t.Reference[min(1, len(t.Reference)):] {
				vis.Walk(term)
			}
			return false
		case *ast.With:
			vis.Walk(t.Value)
			return true
		case *ast.Import:
			if ref, ok := t.Path.Value.(ast.Ref); ok && ref.HasPrefix(ast.InputRootRef) {
				r.pod.Partial = false // an alias of input: the analysis does not follow it
				r.now = r.now || len(ref) == 1 || ref[1].Equal(ast.StringTerm("now"))
			}
			return true
		case *ast.Expr:
			if builtinGet && t.IsCall() && t.Operator().Equal(ast.ObjectGet.Ref()) {
				r.objectGet(vis, t.Operands())
				for _, w := range t.With {
					vis.Walk(w)
				}
				return true
			}
		case *ast.Term:
			switch v := t.Value.(type) {
			case ast.Call:
				if builtinGet && isObjectGet(v) {
					r.objectGet(vis, v[1:])
					return true
				}
			case ast.Ref:
				if !v.HasPrefix(ast.InputRootRef) {
					return false
				}
				path, rest := constPrefix(v)
				r.add(path)
				for _, term := range rest {
					vis.Walk(term)
				}
				return true
			}
		}
		return false
	})
	for _, m := range modules {
		vis.Walk(m)
	}
	if !r.pod.Partial {
		r.pod = PodReads{}
	}
	return r
}

// objectGet reads object.get(x, key, default): a constant key (or key
// path) on a constant path of input reads that path, not x whole.
func (r *inputReads) objectGet(vis *ast.GenericVisitor, operands []*ast.Term) {
	if path, ok := getPath(operands); ok {
		r.add(path)
		for _, term := range operands[2:] {
			vis.Walk(term)
		}
		return
	}
	for _, term := range operands {
		vis.Walk(term)
	}
}

// pathOf is the constant path of input that term is: a ref of string keys
// only, or object.get of one with a constant key.
func pathOf(term *ast.Term) ([]string, bool) {
	switch v := term.Value.(type) {
	case ast.Ref:
		if !v.HasPrefix(ast.InputRootRef) {
			return nil, false
		}
		path, rest := constPrefix(v)
		return path, len(rest) == 0
	case ast.Call:
		if isObjectGet(v) {
			return getPath(v[1:])
		}
	}
	return nil, false
}

// getPath is the constant path of input that object.get's operands (x,
// key, default) read: x a constant path of input (pathOf), then the
// constant key or key path.
func getPath(operands []*ast.Term) ([]string, bool) {
	if len(operands) < 2 {
		return nil, false
	}
	path, ok := pathOf(operands[0])
	if !ok {
		return nil, false
	}
	keys, ok := constKeys(operands[1])
	if !ok {
		return nil, false
	}
	return append(path, keys...), true
}

// isObjectGet reports whether call calls object.get.
func isObjectGet(call ast.Call) bool {
	return len(call) > 0 && call[0].Value.Compare(ast.ObjectGet.Ref()) == 0
}

// constPrefix splits an input ref into its leading constant path ("input",
// then string keys) and the terms after it.
func constPrefix(ref ast.Ref) ([]string, []*ast.Term) {
	path := []string{"input"}
	for i, term := range ref[1:] {
		s, ok := term.Value.(ast.String)
		if !ok {
			return path, ref[1+i:]
		}
		path = append(path, string(s))
	}
	return path, nil
}

// constKeys is object.get's key operand when constant: a string, or an
// array of strings (a key path).
func constKeys(term *ast.Term) ([]string, bool) {
	switch v := term.Value.(type) {
	case ast.String:
		return []string{string(v)}, true
	case *ast.Array:
		keys := make([]string, 0, v.Len())
		for i := range v.Len() {
			s, ok := v.Elem(i).Value.(ast.String)
			if !ok {
				return nil, false
			}
			keys = append(keys, string(s))
		}
		return keys, true
	}
	return nil, false
}

// add records that the rules read path of input and all below it.
func (r *inputReads) add(path []string) {
	r.now = r.now || len(path) < 2 || path[1] == "now"
	r.pod.add(path)
}

func (r *PodReads) add(path []string) {
	switch {
	case len(path) < 2:
		r.Partial = false // input itself
	case path[1] != "pod":
	case len(path) == 2:
		r.Partial = false
	case path[2] == "spec":
		r.Spec.add(path[3:])
	case path[2] != "metadata":
		r.Partial = false // a part of the pod the view does not name: keep it all
	case len(path) == 3:
		r.Metadata = true
	case path[3] == "labels":
		r.Labels.add(path[4:])
	case path[3] == "annotations":
		r.Annotations.add(path[4:])
	default:
		r.Metadata = true
	}
}

func (k *KeysRead) add(rest []string) {
	if len(rest) == 0 {
		k.All = true
		return
	}
	if k.Names == nil {
		k.Names = map[string]bool{}
	}
	k.Names[rest[0]] = true
}

// KeyView is v as the decision memo keys it: only what r says the rules
// read. It shares v's maps and slices where they are kept whole.
func (r PodReads) KeyView(v *PodView) *PodView {
	if !r.Partial {
		return v
	}
	out := &PodView{}
	if r.Metadata {
		out.Metadata = v.Metadata
	} else {
		out.Metadata.Labels = r.Labels.keep(v.Metadata.Labels)
		out.Metadata.Annotations = r.Annotations.keep(v.Metadata.Annotations)
	}
	if r.Spec.All {
		out.Spec = v.Spec
	} else {
		keepSpec(&out.Spec, &v.Spec, r.Spec.Names)
	}
	return out
}

// specFields are PodSpecView's fields by their JSON names, the names a
// policy reads them by.
var specFields = func() map[string]int {
	t := reflect.TypeFor[PodSpecView]()
	out := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out[name] = i
	}
	return out
}()

// keepSpec copies the named fields of src into dst. A name the view does
// not have is no part of any pod's view: a rule reading it reads nothing.
func keepSpec(dst, src *PodSpecView, names map[string]bool) {
	if len(names) == 0 {
		return
	}
	d, s := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem()
	for name := range names {
		if i, ok := specFields[name]; ok {
			d.Field(i).Set(s.Field(i))
		}
	}
}

func (k KeysRead) keep(m map[string]string) map[string]string {
	if k.All {
		return m
	}
	var out map[string]string
	for name := range k.Names {
		if val, ok := m[name]; ok {
			if out == nil {
				out = make(map[string]string, len(k.Names))
			}
			out[name] = val
		}
	}
	return out
}

// objectShadowed reports whether something in modules may answer a call
// of object.get other than the builtin: a rule whose name starts with
// object (a function object.get of the package), an import named object,
// or a with modifier whose target starts with object. Then a call's
// constant key says nothing about what it reads.
func objectShadowed(modules map[string]*ast.Module) bool {
	shadowed := false
	isObject := func(ref ast.Ref) bool {
		return len(ref) > 0 && ref[0].Value.Compare(ast.Var("object")) == 0
	}
	vis := ast.NewGenericVisitor(func(x any) bool {
		switch t := x.(type) {
		case *ast.Rule:
			shadowed = shadowed || isObject(t.Head.Ref())
		case *ast.Import:
			shadowed = shadowed || t.Name().Equal(ast.Var("object"))
		case *ast.With:
			if ref, ok := t.Target.Value.(ast.Ref); ok && isObject(ref) {
				shadowed = true
			}
		}
		return shadowed
	})
	for _, m := range modules {
		vis.Walk(m)
	}
	return shadowed
}
