package main

import (
	"fmt"
	"net"

	"github.com/gpuadmit/gpuadmit/internal/listener"
	"github.com/gpuadmit/gpuadmit/pkg/webhook"
)

// inherit turns the bind addresses that name an inherited listening socket
// (fd:N: a parent that bound the port hands it over, so no other process
// can take it between choice and serving) into o's listeners.
func inherit(o *webhook.Options) error {
	for _, a := range []struct {
		flag, addr string
		ln         *net.Listener
	}{
		{"--health-probe-bind-address", o.ProbeAddr, &o.ProbeListener},
		{"--metrics-bind-address", o.MetricsAddr, &o.MetricsListener},
		{"--pprof-bind-address", o.PprofAddr, &o.PprofListener},
	} {
		l, err := listener.Inherited(a.addr)
		if err != nil {
			return fmt.Errorf("%s: %w", a.flag, err)
		}
		*a.ln = l
	}
	return nil
}
