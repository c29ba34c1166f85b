package cluster

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/gpuadmit/gpuadmit/internal/listener"
)

// portStarts is how many times StartOnPorts starts a component whose ports
// were taken before it bound them.
const portStarts = 3

// StartOnPorts runs another component, the binary name in the binary
// directory as StartProcess runs it, that takes only addresses and binds
// them itself, so it cannot be handed bound listeners (Kueue's manager, say).
// It chooses n addresses free on loopback; args turns them into the
// component's arguments (and does whatever else must name them first, such
// as a configuration file or objects that point at the component); ready
// says whether the component serves on them yet, or what it waits for. The
// ports are free between their choice and the component's bind, so another
// process may take one: a component that exits before it is ready saying a
// port was in use is started again on new addresses, up to three starts in
// all. It returns the addresses the running component has and stop, which
// ends it (the cluster's Stop ends it if the test did not); any other exit,
// or no readiness within timeout, is an error with the end of its log.
func (c *Cluster) StartOnPorts(name string, n int, timeout time.Duration, args func(addrs []string) ([]string, error), ready func(addrs []string) (bool, string)) (addrs []string, stop func(), err error) {
	for i := 1; ; i++ {
		addrs, err := loopbackAddrs(n)
		if err != nil {
			return nil, nil, err
		}
		a, err := args(addrs)
		if err != nil {
			return nil, nil, err
		}
		p, err := startProc(filepath.Join(c.opts.BinDir, name), name, c.LogDir, a...)
		if err != nil {
			return nil, nil, fmt.Errorf("start %s: %w", name, err)
		}
		c.procs = append(c.procs, p)
		err = c.waitReady(p, name, timeout, func() (bool, string) { return ready(addrs) })
		if err == nil {
			return addrs, p.stop, nil
		}
		p.stop()
		if i >= portStarts || !listener.Taken(err) {
			return nil, nil, fmt.Errorf("start %d of %d of %s on %v: %w", i, portStarts, name, addrs, err)
		}
	}
}

// waitReady polls ready until it holds, p exits (listener.ErrTaken when its
// log says a port it was given was in use), or timeout passes.
func (c *Cluster) waitReady(p *Proc, name string, timeout time.Duration, ready func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	for last := ""; ; time.Sleep(100 * time.Millisecond) {
		if p.Exited() {
			tail := c.Tail(name, 25)
			return listener.Exited(fmt.Errorf("%s exited before it was ready:\n%s", name, tail), tail)
		}
		ok, detail := ready()
		if ok {
			return nil
		}
		if detail != "" {
			last = detail
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %s\n%s", name, timeout, last, c.Tail(name, 25))
		}
	}
}

// loopbackAddrs are n distinct addresses free on loopback now: each port
// stays bound until all are chosen, so none is chosen twice.
func loopbackAddrs(n int) ([]string, error) {
	addrs := make([]string, 0, n)
	for range n {
		l, err := listener.Loopback("")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}
