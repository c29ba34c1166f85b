package offline

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/gpuadmit/gpuadmit/pkg/policy"
	"github.com/gpuadmit/gpuadmit/pkg/quota"
)

// Test compiles a policy set and runs its tests, printing one line per test
// and a closing "N passed, N failed" line. It fails when the set would not go live.
func Test(ctx context.Context, dir string, w io.Writer) error {
	src := policySource(dir)
	set, err := policy.Compile(ctx, src)
	var tf *policy.TestFailure
	switch {
	case errors.As(err, &tf):
		printTests(w, tf.Results)
		return fmt.Errorf("policy set %s would not go live: %w", src.Name, err)
	case err != nil:
		return err
	}
	if err := quota.ValidSet(set); err != nil {
		printTests(w, set.Tests)
		return fmt.Errorf("policy set %s would not go live: %w", src.Name, err)
	}
	fmt.Fprintf(w, "policy set %s, revision %s: ready to go live\n", set.Source, set.Revision)
	printTests(w, set.Tests)
	return nil
}

func printTests(w io.Writer, results []policy.TestResult) {
	passed, failed := 0, 0
	for _, r := range results {
		verdict := "PASS"
		if !r.Passed {
			verdict, failed = "FAIL", failed+1
		} else {
			passed++
		}
		fmt.Fprintf(w, "%s %s.%s (%s)", verdict, r.Package, r.Name, r.Duration.Round(1000))
		if r.Message != "" {
			fmt.Fprintf(w, ": %s", r.Message)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%d passed, %d failed\n", passed, failed)
}
