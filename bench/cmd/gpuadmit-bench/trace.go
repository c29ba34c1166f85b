package main

import (
	"fmt"

	"github.com/gpuadmit/gpuadmit/bench/packing"
)

// checksumsUsage is the help of --checksums.
const checksumsUsage = "SHA-256 sums (sha256sum's format) that the trace files read must match " +
	"(default: the published openb trace's, " + packing.OpenbSumsFile + ")"

// verifyTrace checks the files of the trace directory dir that a run reads
// against the sums in sumsFile, or the published openb trace's when it is
// empty, so that a study is never made on a trace other than the one named.
func verifyTrace(dir, sumsFile string, files []string) error {
	if sumsFile != "" {
		sums, err := packing.ReadChecksums(sumsFile)
		if err != nil {
			return fmt.Errorf("--checksums: %w", err)
		}
		return sums.Verify(dir, files...)
	}
	if err := packing.OpenbChecksums().Verify(dir, files...); err != nil {
		return fmt.Errorf("%w\nThe study reads the published openb trace: hack/fetch-openb.sh DIR fetches and "+
			"checks it (docs/trace.md). To run on other files, give --checksums a sha256sum file that lists them.", err)
	}
	return nil
}
