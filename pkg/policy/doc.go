// Package policy is gpuadmit's Rego engine. It loads a policy set (a
// directory such as a Git checkout or a mounted ConfigMap, or the embedded
// default set), compiles it with OPA, runs the set's own *_test.rego tests,
// and only then makes it the active set, atomically. A set that fails to load,
// compile or test never becomes active: Load returns the error and the last
// good set keeps serving. Every set is compiled, tested and evaluated in a
// sandbox (Capabilities): no builtin OPA marks nondeterministic — no
// network, runtime, clock or randomness — so a decision depends only on its
// input; the time, where a set reads it, is input.now at the granularity
// the set declares (Set.Now).
//
// Evaluate runs data.gpuadmit.decision against an Input and returns a
// Decision whose shape has been checked. The active set's Revision is a Git
// commit when the directory is a checkout, else a hash of its contents.
package policy
