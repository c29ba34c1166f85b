package main

import (
	"github.com/spf13/cobra"

	"github.com/gpuadmit/gpuadmit/bench/admission"
)

// noopCmd is the no-op webhook the admission benchmark starts as a process
// of its own (through a symlink named noop-webhook); hidden, as no one else
// runs it.
func noopCmd() *cobra.Command {
	var o admission.NoopOptions
	cmd := &cobra.Command{
		Use:    admission.NoopCommand,
		Short:  "Serve the admission benchmark's no-op webhook",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return admission.ServeNoop(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Host, "host", "127.0.0.1", "address the webhook listens on")
	f.IntVar(&o.Port, "port", 9443, "webhook port")
	f.StringVar(&o.CertDir, "cert-dir", "", "directory with tls.crt and tls.key")
	f.StringVar(&o.MetricsAddr, "metrics-bind-address", "0", `Prometheus /metrics address; "0" disables`)
	f.StringVar(&o.ReplayPatch, "replay-patch", "", "JSON patch file the replay path answers with (read at its first review)")
	return cmd
}
