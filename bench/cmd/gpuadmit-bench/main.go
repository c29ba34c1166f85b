// Command gpuadmit-bench runs gpuadmit's benchmarks: the admission latency
// study on a real control plane (`admission`), the packing study on the
// Alibaba openb trace (`packing` for one run, `study` for all of them), and
// the trace replayed through a real scheduler (`replay`). It is
// apart from the user's command line, gpuadmit, so that gpuadmit links no
// benchmark harness, control-plane test code or plotting library.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	root := &cobra.Command{Use: "gpuadmit-bench", Short: "Run gpuadmit's benchmarks", SilenceUsage: true}
	root.AddCommand(packingCmd(), studyCmd(), admissionCmd(), noopCmd(), replayCmd(), agentsCmd(), scaleCmd())
	if err := root.ExecuteContext(ctx); err != nil {
		os.Exit(1)
	}
}

// outcome is a benchmark run: files for a directory, a table for a person.
type outcome interface {
	WriteFiles(dir string) error
	Markdown(w io.Writer)
}

// report writes rep's files into out (none when out is empty), then its table to stdout.
func report(cmd *cobra.Command, rep outcome, out string) error {
	if out != "" {
		if err := rep.WriteFiles(out); err != nil {
			return err
		}
	}
	rep.Markdown(cmd.OutOrStdout())
	return nil
}
