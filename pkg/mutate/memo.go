package mutate

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// ActiveSource says which policy set an Evaluator answers with now, and
// the time by its clock; an Evaluator that has one (policy.Engine) gets its
// decisions memoized.
type ActiveSource interface {
	Active() *policy.Set
	Now() time.Time
}

// memoLimit bounds the decisions kept for one inventory and revision; the
// memo starts over when it is full.
const memoLimit = 4096

// decisionMemo remembers the policy's answers for one inventory under one
// policy revision, by a hash of everything else the policy reads: what the
// set's rules read of the pod's view (policy.View, the same for every pod
// of a template; policy.PodReads.KeyView), its namespace,
// who creates it, the namespace's quota and usage, the normalized
// request, and input.now where the set reads it: the time truncated to
// the set's granularity, so pods within one granule share an answer and
// pods across a boundary do not (a set that does not read the time has
// none in its key). A new inventory or revision starts it over. The answer is the
// ordered candidates, not the final choice: the pool with free room is
// picked per pod after (choose). Safe for concurrent use.
type decisionMemo struct {
	mu      sync.Mutex
	inv     *inventory.Inventory
	rev     string
	entries map[[sha256.Size]byte]policy.Decision
}

var memoLookups = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "gpuadmit_decision_memo_lookups_total",
	Help: "Policy evaluations asked of the decision memo, by result (hit: the policy's answer for the same template, namespace, quota, inventory and revision was reused; miss: the policy ran).",
}, []string{"result"})

func init() { metrics.Registry.MustRegister(memoLookups) }

// memoKey hashes the input but its pools (the inventory, keyed by
// identity), and of the pod only what the set's rules can read (reads).
func memoKey(in policy.Input, reads policy.PodReads) ([sha256.Size]byte, error) {
	in.Pools = nil
	if in.Pod != nil {
		in.Pod = reads.KeyView(in.Pod)
	}
	b, err := json.Marshal(in)
	if err != nil {
		return [sha256.Size]byte{}, fmt.Errorf("hash policy input: %w", err)
	}
	return sha256.Sum256(b), nil
}

func (m *decisionMemo) get(inv *inventory.Inventory, rev string, key [sha256.Size]byte) (policy.Decision, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.inv != inv || m.rev != rev {
		return policy.Decision{}, false
	}
	d, ok := m.entries[key]
	return d, ok
}

func (m *decisionMemo) put(inv *inventory.Inventory, rev string, key [sha256.Size]byte, d policy.Decision) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.inv != inv || m.rev != rev || len(m.entries) >= memoLimit {
		m.inv, m.rev, m.entries = inv, rev, map[[sha256.Size]byte]policy.Decision{}
	}
	m.entries[key] = d
}

// evaluate asks the policy, or the memo where it answered the same input
// for this inventory and the active revision before. A memoized decision
// is shared: callers must not write into it (decide only appends to its
// lists, which are clipped so that appending copies them).
func (m *Mutator) evaluate(ctx context.Context, inv *inventory.Inventory, in policy.Input) (policy.Decision, error) {
	src, ok := m.eval.(ActiveSource)
	if !ok {
		return m.eval.Evaluate(ctx, in)
	}
	set := src.Active()
	if set == nil {
		return m.eval.Evaluate(ctx, in)
	}
	// The time is taken once, for the key and the evaluation alike: the
	// engine keeps a time it is given (truncated to the same granule).
	in.Now = set.Now(src.Now())
	key, err := memoKey(in, set.Reads)
	if err != nil {
		return policy.Decision{}, err
	}
	if d, ok := m.memo.get(inv, set.Revision, key); ok {
		memoLookups.WithLabelValues("hit").Inc()
		return d, nil
	}
	memoLookups.WithLabelValues("miss").Inc()
	d, err := m.eval.Evaluate(ctx, in)
	if err != nil {
		return d, err
	}
	// Callers append to the lists (warnings of their own); clipped, an
	// append copies them and never writes into the memoized decision.
	d.Deny, d.Warnings = slices.Clip(d.Deny), slices.Clip(d.Warnings)
	// A new set may have gone live during the evaluation: keep the answer
	// only under the revision that made it.
	if d.Revision == set.Revision {
		m.memo.put(inv, d.Revision, key, d)
	}
	return d, nil
}
