package main

import (
	"encoding/base64"
	"fmt"
	"net"

	"github.com/spf13/cobra"

	"github.com/gpuadmit/gpuadmit/certs"
)

// certsCmd is the development bootstrap: a CA and a serving certificate for
// the webhook Service, written to a directory, and the caBundle printed.
func certsCmd() *cobra.Command {
	var o certs.Options
	var out string
	var ips []string
	cmd := &cobra.Command{
		Use:   "certs --out DIR",
		Short: "Make a development CA and webhook serving certificate; print the caBundle",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, s := range ips {
				ip := net.ParseIP(s)
				if ip == nil {
					return fmt.Errorf("--ip %q is not an IP address", s)
				}
				o.IPs = append(o.IPs, ip)
			}
			b, err := certs.Generate(o)
			if err != nil {
				return err
			}
			if err := b.WriteDir(out); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), base64.StdEncoding.EncodeToString(b.CACert))
			return nil
		},
	}
	cmd.Flags().StringVar(&o.Service, "service", "gpuadmit-webhook", "the webhook Service")
	cmd.Flags().StringVar(&o.Namespace, "namespace", "gpuadmit-system", "the Service's namespace")
	cmd.Flags().StringSliceVar(&o.DNSNames, "dns-name", nil, "further DNS names (e.g. localhost)")
	cmd.Flags().StringSliceVar(&ips, "ip", nil, "IP addresses (e.g. 127.0.0.1 for a local run)")
	cmd.Flags().DurationVar(&o.Validity, "validity", 0, "validity (default one year)")
	cmd.Flags().StringVar(&out, "out", "", "directory for ca.crt, ca.key, tls.crt and tls.key")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}
