package policy

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/loader"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"
)

// DecisionQuery is the document every policy set must define.
const DecisionQuery = "data.gpuadmit.decision"

// Set is a compiled, tested policy set, ready to evaluate. It is immutable.
type Set struct {
	// Revision is "git-<commit>" or "sha256-<content hash>".
	Revision string
	// Source says where the set was read from.
	Source string
	// Tests are the set's own test results; all passed.
	Tests []TestResult
	// Data is the set's data documents (data.gpuadmit.config, data.gpuadmit.quotas, …); read only.
	Data map[string]any
	// Reads is what the set's rules can read of input.pod.
	Reads PodReads
	// NowGranularity is how finely the set's rules see the time in
	// input.now, as its data declares (data.gpuadmit.config.nowGranularity);
	// zero when no rule reads input.now, and its input then has no time.
	NowGranularity time.Duration
	query          rego.PreparedEvalQuery
}

// TestResult is the outcome of one test_ rule of a set.
type TestResult struct {
	Package string
	Name    string
	Passed  bool
	// Message is why the test did not pass (an error, or "fail"), with its location.
	Message  string
	Duration time.Duration
}

// TestFailure is the error Compile returns when a set's tests do not all pass.
type TestFailure struct {
	Revision string
	Results  []TestResult
}

func (f *TestFailure) Error() string {
	var failed []string
	for _, r := range f.Results {
		if !r.Passed {
			failed = append(failed, r.Package+"."+r.Name+": "+r.Message)
		}
	}
	return fmt.Sprintf("policy revision %s: %d of %d tests failed: %s", f.Revision, len(failed), len(f.Results), strings.Join(failed, "; "))
}

// Compile loads, compiles and tests a set without activating it. A set with
// compile errors, no decision rule, no tests or a failing test is an error;
// a *TestFailure carries the test results.
func Compile(ctx context.Context, src Source) (*Set, error) {
	loaded, err := src.load()
	if err != nil {
		return nil, fmt.Errorf("load policy set %s: %w", src.Name, err)
	}
	rev, err := revision(src, loaded)
	if err != nil {
		return nil, err
	}
	reads := readsOf(loaded.ParsedModules()) // before the compiler rewrites them
	granularity, err := nowGranularity(loaded.Documents, reads.now)
	if err != nil {
		return nil, fmt.Errorf("policy set %s (revision %s): %w", src.Name, rev, err)
	}
	compiler, err := compile(loaded)
	if err != nil {
		return nil, fmt.Errorf("compile policy set %s (revision %s): %w", src.Name, rev, err)
	}
	results, err := runTests(ctx, loaded)
	if err != nil {
		return nil, fmt.Errorf("test policy set %s (revision %s): %w", src.Name, rev, err)
	}
	if err := checkResults(rev, results); err != nil {
		return nil, err
	}
	query, err := prepare(ctx, compiler, loaded)
	if err != nil {
		return nil, fmt.Errorf("prepare policy set %s (revision %s): %w", src.Name, rev, err)
	}
	return &Set{Revision: rev, Source: src.Name, Tests: results, Data: loaded.Documents,
		Reads: reads.pod, NowGranularity: granularity, query: query}, nil
}

func compile(loaded *loader.Result) (*ast.Compiler, error) {
	compiler := newCompiler()
	if compiler.Compile(loaded.ParsedModules()); compiler.Failed() {
		if err := refusals(compiler.Errors, loaded.ParsedModules()); err != nil {
			return nil, err
		}
		return nil, compiler.Errors
	}
	if len(compiler.GetRulesExact(ast.MustParseRef(DecisionQuery))) == 0 {
		return nil, fmt.Errorf("the set defines no %s rule", DecisionQuery)
	}
	return compiler, nil
}

func prepare(ctx context.Context, compiler *ast.Compiler, loaded *loader.Result) (rego.PreparedEvalQuery, error) {
	// The data documents are converted to OPA values once, here, not on
	// every read of data.gpuadmit.config during an evaluation. They came
	// from YAML and JSON files, so they are JSON-serializable; the
	// round trip on write checks it anyway.
	store, err := loaded.StoreWithOpts(inmem.OptRoundTripOnWrite(true), inmem.OptReturnASTValuesOnRead(true))
	if err != nil {
		return rego.PreparedEvalQuery{}, err
	}
	return rego.New(
		rego.Query(DecisionQuery),
		rego.Compiler(compiler),
		rego.Capabilities(compiler.Capabilities()),
		rego.Store(store),
	).PrepareForEval(ctx)
}

// runTests runs the set's test_ rules through OPA's tester, with a
// compiler of the sandbox's capabilities as the set's own (the tester's
// default allows every builtin: a test could reach the network while the
// set loads).
func runTests(ctx context.Context, loaded *loader.Result) ([]TestResult, error) {
	// The data documents are converted to OPA values once, here, not on
	// every read of data.gpuadmit.config during an evaluation. They came
	// from YAML and JSON files, so they are JSON-serializable; the
	// round trip on write checks it anyway.
	store, err := loaded.StoreWithOpts(inmem.OptRoundTripOnWrite(true), inmem.OptReturnASTValuesOnRead(true))
	if err != nil {
		return nil, err
	}
	ch, err := tester.NewRunner().
		SetCompiler(newCompiler()).
		SetStore(store).
		SetModules(loaded.ParsedModules()).
		SetTimeout(30*time.Second).
		RunTests(ctx, nil)
	if err != nil {
		return nil, err
	}
	var results []TestResult
	for r := range ch {
		results = append(results, testResult(r))
	}
	sort.Slice(results, func(i, j int) bool { return results[i].Package+results[i].Name < results[j].Package+results[j].Name })
	return results, nil
}

func testResult(r *tester.Result) TestResult {
	tr := TestResult{Package: r.Package, Name: r.Name, Passed: r.Pass(), Duration: r.Duration}
	switch {
	case r.Error != nil:
		tr.Message = r.Error.Error()
	case r.Fail:
		tr.Message = "fail"
		if r.Location != nil {
			tr.Message = "fail at " + r.Location.String()
		}
	case r.Skip:
		tr.Message = "skipped"
	}
	return tr
}

// errNoTests is returned for a set with no test_ rules: a set goes live only once tested.
var errNoTests = errors.New("the set has no tests (test_ rules in *_test.rego); a policy set is tested before it goes live")

func checkResults(rev string, results []TestResult) error {
	if len(results) == 0 {
		return fmt.Errorf("policy revision %s: %w", rev, errNoTests)
	}
	for _, r := range results {
		if !r.Passed && r.Message != "skipped" {
			return &TestFailure{Revision: rev, Results: results}
		}
	}
	return nil
}
