package webhook

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// check is one readiness condition: ok, and a line of detail either way.
type check struct {
	name string
	run  func(*http.Request) (bool, string)
}

// probes serves /healthz and /readyz. Readiness reports each check's detail,
// including a policy set that failed to load while the last good one serves:
// that replica stays ready, since refusing traffic would turn one bad commit
// into an outage of every GPU pod create (failurePolicy Fail).
type probes struct {
	addr     string
	ln       net.Listener // bound by the caller; nil listens on addr
	checks   []check
	stopping atomic.Bool
	log      logr.Logger
}

// NeedLeaderElection is false: every replica serves its own probes.
func (p *probes) NeedLeaderElection() bool { return false }

func (p *probes) Start(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", p.ready)
	ln := p.ln
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", p.addr); err != nil {
			return fmt.Errorf("listen for probes on %s: %w", p.addr, err)
		}
	}
	p.log.Info("serving probes", "address", ln.Addr().String())
	return serveHTTP(ctx, ln, mux, func() { p.stopping.Store(true) })
}

func (p *probes) ready(w http.ResponseWriter, r *http.Request) {
	var b strings.Builder
	ok := !p.stopping.Load()
	if !ok {
		b.WriteString("[-]shutdown: draining in-flight reviews\n")
	}
	for _, c := range p.checks {
		good, detail := c.run(r)
		mark := "+"
		if !good {
			mark, ok = "-", false
		}
		fmt.Fprintf(&b, "[%s]%s: %s\n", mark, c.name, detail)
	}
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprint(w, b.String())
}

// policyCheck is ready once a set is active, and tells about the last failure.
func policyCheck(engine *policy.Engine, w *policy.Watcher) check {
	return check{name: "policy", run: func(*http.Request) (bool, string) {
		set := engine.Active()
		if set == nil {
			detail := "no policy set is active yet"
			if w != nil && w.Status().Failure != "" {
				detail += "; last load failed: " + w.Status().Failure
			}
			return false, detail
		}
		detail := fmt.Sprintf("revision %s from %s", set.Revision, set.Source)
		if w != nil {
			if st := w.Status(); st.Failure != "" {
				detail += fmt.Sprintf("; a newer set was NOT activated (at %s): %s", st.FailedAt.UTC().Format(time.RFC3339), st.Failure)
			}
		}
		return true, detail
	}}
}

// recordKeyCheck says whether gpuadmit seals its record, and with which
// keys. A missing key leaves the replica ready — the Secret is optional —
// but the detail says so, since a pod that comes back without a seal is
// decided again and refused if the decision changed meanwhile.
func recordKeyCheck(keys record.KeySource) check {
	return check{name: "recordKey", run: func(*http.Request) (bool, string) {
		if keys == nil {
			return true, "NONE: no --record-key-dir, records are not sealed and pods that come back are decided again"
		}
		ks := keys.RecordKeys()
		if len(ks.Current) == 0 {
			return true, fmt.Sprintf("NONE: the Secret %s is absent or has no current key, records are not sealed and pods that come back are decided again", recordKeySecret)
		}
		return true, fmt.Sprintf("current %s, previous %s", record.KeyID(ks.Current), keyIDOrNone(ks.Previous))
	}}
}
