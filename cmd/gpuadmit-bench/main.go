// Command gpuadmit-bench runs gpuadmit's benchmarks: the admission latency
// study on a real control plane (`admission`), the packing study on the
// Alibaba openb trace (`packing` for one run, `study` for all of them), and
// the trace replayed through a real scheduler (`replay`). It is
// apart from the user's command line, gpuadmit, so that gpuadmit links no
// benchmark harness, control-plane test code or plotting library.
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	root := &cobra.Command{Use: "gpuadmit-bench", Short: "Run gpuadmit's benchmarks", SilenceUsage: true}
	root.AddCommand(packingCmd(), studyCmd(), admissionCmd(), noopCmd(), replayCmd())
	if err := root.ExecuteContext(ctx); err != nil {
		os.Exit(1)
	}
}
