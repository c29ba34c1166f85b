package policy

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestReadsNow(t *testing.T) {
	tests := map[string]struct {
		rules string
		want  bool
	}{
		"input.now":                     {rules: `x := input.now`, want: true},
		"input.now in a builtin":        {rules: `x := time.clock(input.now)`, want: true},
		"object.get of input, now":      {rules: `x := object.get(input, "now", 0)`, want: true},
		"input whole":                   {rules: `x := input`, want: true},
		"a key computed":                {rules: `x := input[concat("", ["n", "ow"])]`, want: true},
		"an alias of input.now":         {rules: "import input.now as n\nx := n", want: true},
		"an alias of input":             {rules: "import input as i\nx := i.pod", want: true},
		"the pod":                       {rules: `x := input.pod.metadata.labels.a`},
		"an alias of the pod":           {rules: "import input.pod as p\nx := p.metadata"},
		"the namespace":                 {rules: `x := input.namespace.name`},
		"a with target is not a read":   {rules: "x := 1\ntest_x if x with input.now as 5"},
		"a with value is":               {rules: "x := 1\ny if x with data.z as input.now", want: true},
		"time builtins of a data value": {rules: `x := time.clock(data.t)`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := ast.MustParseModuleWithOpts("package p\n"+tc.rules, ast.ParserOptions{RegoVersion: ast.RegoV1})
			if got := readsOf(map[string]*ast.Module{"p.rego": m}).now; got != tc.want {
				t.Errorf("reads input.now = %t, want %t", got, tc.want)
			}
		})
	}
}

// nowSet is a set whose decision warns with input.now, and data declaring
// granularity (none when empty).
func nowSet(granularity string) Source {
	fsys := fstest.MapFS{
		"decision.rego":      {Data: []byte("package gpuadmit\n\ndecision := {\"deny\": [], \"warnings\": [sprintf(\"now %d\", [input.now])]}\n")},
		"decision_test.rego": {Data: []byte("package gpuadmit_test\n\ntest_now if data.gpuadmit.decision.warnings == [\"now 60\"] with input.now as 60\n")},
	}
	if granularity != "" {
		fsys["data.yaml"] = &fstest.MapFile{Data: []byte("gpuadmit:\n  config:\n    nowGranularity: " + granularity + "\n")}
	}
	return Source{FS: fsys, Name: "now-" + granularity}
}

func TestNowGranularity(t *testing.T) {
	tests := map[string]struct {
		src     Source
		want    time.Duration
		wantErr string
	}{
		"declared":               {src: nowSet("1m"), want: time.Minute},
		"quoted":                 {src: nowSet(`"1h"`), want: time.Hour},
		"undeclared":             {src: nowSet(""), wantErr: "declares no data.gpuadmit.config.nowGranularity"},
		"not a duration":         {src: nowSet("soon"), wantErr: "nowGranularity"},
		"a number":               {src: nowSet("60"), wantErr: `nowGranularity is 60, want a duration such as "1m"`},
		"finer than a second":    {src: nowSet("100ms"), wantErr: "is 100ms, want at least 1s"},
		"declared, not read":     {src: Source{FS: embeddedWith(t, map[string]string{"now.yaml": "gpuadmit:\n  config:\n    nowGranularity: 1m\n"}), Name: "unread"}},
		"default set reads none": {src: Embedded()},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			set, err := Compile(context.Background(), tc.src)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Compile: err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if set.NowGranularity != tc.want {
				t.Errorf("NowGranularity = %s, want %s", set.NowGranularity, tc.want)
			}
		})
	}
}

// TestEvaluateSeesTheTruncatedTime: the policy sees the engine's clock, or
// a caller's time, truncated to the set's granularity, in nanoseconds.
func TestEvaluateSeesTheTruncatedTime(t *testing.T) {
	at := time.Date(2026, 3, 4, 12, 34, 56, 789, time.UTC)
	clock := clocktesting.NewFakePassiveClock(at)
	e := NewEngine(Options{Clock: clock})
	if _, err := e.Load(context.Background(), nowSet("1m")); err != nil {
		t.Fatal(err)
	}
	minute := time.Date(2026, 3, 4, 12, 34, 0, 0, time.UTC).UnixNano()
	tests := map[string]struct {
		in   Input
		want int64
	}{
		"the engine's clock":            {want: minute},
		"a caller's time, truncated":    {in: Input{Now: at.Add(3 * time.Second).UnixNano()}, want: minute},
		"a caller's time, next granule": {in: Input{Now: at.Add(4 * time.Second).UnixNano()}, want: minute + int64(time.Minute)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d, err := e.Evaluate(context.Background(), tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{"now " + strconv.FormatInt(tc.want, 10)}; len(d.Warnings) != 1 || d.Warnings[0] != want[0] {
				t.Errorf("warnings %q, want %q", d.Warnings, want)
			}
		})
	}
}

func TestSetNow(t *testing.T) {
	s := &Set{NowGranularity: time.Hour}
	at := time.Date(2026, 3, 4, 12, 34, 56, 0, time.FixedZone("UTC+5:30", 5*3600+1800))
	if got, want := s.Now(at), time.Date(2026, 3, 4, 7, 0, 0, 0, time.UTC).UnixNano(); got != want {
		t.Errorf("Now = %s, want the hour since the epoch %s", time.Unix(0, got).UTC(), time.Unix(0, want).UTC())
	}
	if got := (&Set{}).Now(at); got != 0 {
		t.Errorf("a set that reads no time: Now = %d, want 0", got)
	}
}
