package webhook

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// served is plain HTTP on a listener the caller bound and handed over
// (Options.MetricsListener, Options.PprofListener), in place of the
// manager's own server for that address, which binds it itself. Every
// replica serves it.
type served struct {
	name    string
	ln      net.Listener
	handler http.Handler
	log     logr.Logger
}

var _ manager.LeaderElectionRunnable = (*served)(nil)

// NeedLeaderElection is false: every replica serves its own.
func (s *served) NeedLeaderElection() bool { return false }

// Start serves until ctx ends.
func (s *served) Start(ctx context.Context) error {
	s.log.Info("serving "+s.name, "address", s.ln.Addr().String())
	return serveHTTP(ctx, s.ln, s.handler, nil)
}

// serveHTTP serves h on ln until ctx ends, then calls stopping (when not
// nil) and closes the server; a server closed so is no error.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler, stopping func()) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		if stopping != nil {
			stopping()
		}
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// metricsHandler serves controller-runtime's registry at /metrics, as the
// manager's metrics server does.
func metricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	return mux
}

// pprofHandler serves Go's profiles at /debug/pprof, as the manager's
// pprof server does.
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// addServed has the manager serve /metrics and /debug/pprof on the
// listeners opts hands over; the manager's own servers then bind nothing
// (newManager).
func addServed(mgr manager.Manager, opts Options, log logr.Logger) error {
	for _, s := range []*served{
		{name: "metrics", ln: opts.MetricsListener, handler: metricsHandler(), log: log},
		{name: "pprof", ln: opts.PprofListener, handler: pprofHandler(), log: log},
	} {
		if s.ln == nil {
			continue
		}
		if err := mgr.Add(s); err != nil {
			return err
		}
	}
	return nil
}
