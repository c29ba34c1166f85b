package policy

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/rego"
	"k8s.io/utils/clock"
)

// ErrNoActiveSet is returned by Evaluate before any set was loaded.
var ErrNoActiveSet = errors.New("no policy set is active")

// DefaultEvalTimeout is the time budget of one evaluation when Options
// gives none. The default set takes about a millisecond (p99 1.3 ms, in
// docs/benchmarks.md), so the budget is some 200 times that; it stays well
// inside the webhook's timeoutSeconds (5), which must also cover the API
// server's round trip, a queue for CPU under load (16–21 ms measured) and a
// second call when the API server reinvokes gpuadmit. A policy that runs
// past it fails that pod's admission (an error, not a denial), rather than
// the API server's call timing out.
const DefaultEvalTimeout = 250 * time.Millisecond

// Options tunes an Engine. The zero value works.
type Options struct {
	// EvalTimeout bounds one evaluation. Zero means DefaultEvalTimeout.
	EvalTimeout time.Duration
	// Validate checks a compiled, tested set before it goes live (e.g. its
	// quota declarations); an error keeps the previous set. Nil checks nothing.
	Validate func(*Set) error
	// Clock is where input.now comes from; nil means the real clock.
	Clock clock.PassiveClock
}

// Engine holds the active policy set and evaluates decisions with it. It is
// safe for concurrent use: Evaluate never blocks on Load.
type Engine struct {
	opts   Options
	active atomic.Pointer[Set]
}

// NewEngine returns an engine with no active set.
func NewEngine(opts Options) *Engine {
	if opts.EvalTimeout <= 0 {
		opts.EvalTimeout = DefaultEvalTimeout
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Engine{opts: opts}
}

// Now is the time by the engine's clock, the time input.now is taken from.
func (e *Engine) Now() time.Time { return e.opts.Clock.Now() }

// Load compiles and tests the set from src and, only if that succeeds, makes
// it the active set. On error the previous set stays active.
func (e *Engine) Load(ctx context.Context, src Source) (*Set, error) {
	set, err := Compile(ctx, src)
	if err == nil && e.opts.Validate != nil {
		if verr := e.opts.Validate(set); verr != nil {
			err = fmt.Errorf("policy revision %s: %w", set.Revision, verr)
		}
	}
	if err != nil {
		loadFailures.Inc()
		return nil, err
	}
	e.active.Store(set)
	setActiveRevision(set.Revision)
	return set, nil
}

// Active returns the active set, or nil before the first successful Load.
func (e *Engine) Active() *Set { return e.active.Load() }

// Evaluate runs the active set's decision query against in.
func (e *Engine) Evaluate(ctx context.Context, in Input) (Decision, error) {
	set := e.active.Load()
	if set == nil {
		return Decision{}, ErrNoActiveSet
	}
	at := e.Now()
	if in.Now != 0 {
		at = time.Unix(0, in.Now)
	}
	in.Now = set.Now(at)
	value, err := inputValue(in)
	if err != nil {
		return Decision{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, e.opts.EvalTimeout)
	defer cancel()
	start := time.Now()
	rs, err := set.query.Eval(ctx, rego.EvalParsedInput(value))
	evalDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		evalErrors.Inc()
		return Decision{}, fmt.Errorf("evaluate policy revision %s (budget %s): %w", set.Revision, e.opts.EvalTimeout, err)
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return Decision{}, fmt.Errorf("policy revision %s: %s is undefined for this pod", set.Revision, DecisionQuery)
	}
	d, err := decode(rs[0].Expressions[0].Value)
	if err != nil {
		return Decision{}, fmt.Errorf("policy revision %s: %w", set.Revision, err)
	}
	d.Revision = set.Revision
	return d, nil
}
