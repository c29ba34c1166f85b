package decide

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// Evaluator makes a policy decision for one pod.
type Evaluator interface {
	Evaluate(ctx context.Context, in policy.Input) (policy.Decision, error)
}

// ActiveSource says which policy set an Evaluator answers with now, and
// the time by its clock; an Evaluator that has one (policy.Engine) gets its
// decisions memoized.
type ActiveSource interface {
	Active() *policy.Set
	Now() time.Time
}

// memoLimit bounds the decisions kept for one input.pools and revision; the
// memo starts over when it is full.
const memoLimit = 4096

// Memo remembers the policy's answers for one input.pools (by a
// hash of their content: pools, their sizes, modes, taints) under one
// policy revision, by a hash of everything else the policy reads: what the
// set's rules read of the pod's view (policy.View, the same for every pod
// of a template; policy.PodReads.KeyView), its namespace,
// who creates it, the namespace's quota and usage, the normalized
// request, and input.now where the set reads it: the time truncated to
// the set's granularity, so pods within one granule share an answer and
// pods across a boundary do not (a set that does not read the time has
// none in its key). New pools or a new revision start it over; a rebuilt
// inventory whose pools say the same (a node's other labels or its
// heartbeat changed, or a change that leaves every pool as it was) keeps
// it. The answer is the ordered candidates, not the final choice: the pool with free room is
// picked per pod after (choose). The zero Memo is empty; it is safe for
// concurrent use.
type Memo struct {
	mu      sync.Mutex
	pools   [sha256.Size]byte // poolsKey of the entries' inventory
	rev     string
	entries map[[sha256.Size]byte]policy.Decision

	last atomic.Pointer[poolsHash] // the last inventory's poolsKey, hashed once
}

// poolsHash is an inventory's poolsKey.
type poolsHash struct {
	inv *inventory.Inventory
	sum [sha256.Size]byte
}

var memoLookups = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "gpuadmit_decision_memo_lookups_total",
	Help: "Policy evaluations asked of the decision memo, by result (hit: the policy's answer for the same template, namespace, quota, pools and revision was reused; miss: the policy ran).",
}, []string{"result"})

func init() { metrics.Registry.MustRegister(memoLookups) }

// poolsKey hashes what the policy reads of inv: its pools as input.pools
// holds them (their JSON, which policy.PreparePools converts), not the
// nodes, which it does not read. Hashed once per inventory.
func (m *Memo) poolsKey(inv *inventory.Inventory) ([sha256.Size]byte, error) {
	if h := m.last.Load(); h != nil && h.inv == inv {
		return h.sum, nil
	}
	b, err := json.Marshal(inv.Pools)
	if err != nil {
		return [sha256.Size]byte{}, fmt.Errorf("hash pools: %w", err)
	}
	h := &poolsHash{inv: inv, sum: sha256.Sum256(b)}
	m.last.Store(h)
	return h.sum, nil
}

// memoKey hashes the input but its pools (keyed apart, by poolsKey), and
// of the pod only what the set's rules can read (reads).
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

func (m *Memo) get(pools [sha256.Size]byte, rev string, key [sha256.Size]byte) (policy.Decision, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pools != pools || m.rev != rev {
		return policy.Decision{}, false
	}
	d, ok := m.entries[key]
	return d, ok
}

func (m *Memo) put(pools [sha256.Size]byte, rev string, key [sha256.Size]byte, d policy.Decision) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil || m.pools != pools || m.rev != rev || len(m.entries) >= memoLimit {
		m.pools, m.rev, m.entries = pools, rev, map[[sha256.Size]byte]policy.Decision{}
	}
	m.entries[key] = d
}

// Evaluate asks eval, or the memo where it answered the same input
// for the same pools and the active revision before. A memoized decision
// is shared: callers must not write into it (they only append to its
// lists, which are clipped so that appending copies them).
func (m *Memo) Evaluate(ctx context.Context, eval Evaluator, inv *inventory.Inventory, in policy.Input) (policy.Decision, error) {
	src, ok := eval.(ActiveSource)
	if !ok {
		return eval.Evaluate(ctx, in)
	}
	set := src.Active()
	if set == nil {
		return eval.Evaluate(ctx, in)
	}
	// The time is taken once, for the key and the evaluation alike: the
	// engine keeps a time it is given (truncated to the same granule).
	in.Now = set.Now(src.Now())
	key, err := memoKey(in, set.Reads)
	if err != nil {
		return policy.Decision{}, err
	}
	pools, err := m.poolsKey(inv)
	if err != nil {
		return policy.Decision{}, err
	}
	if d, ok := m.get(pools, set.Revision, key); ok {
		memoLookups.WithLabelValues("hit").Inc()
		return d, nil
	}
	memoLookups.WithLabelValues("miss").Inc()
	d, err := eval.Evaluate(ctx, in)
	if err != nil {
		return d, err
	}
	// Callers append to the lists (warnings of their own); clipped, an
	// append copies them and never writes into the memoized decision.
	d.Deny, d.Warnings = slices.Clip(d.Deny), slices.Clip(d.Warnings)
	// A new set may have gone live during the evaluation: keep the answer
	// only under the revision that made it.
	if d.Revision == set.Revision {
		m.put(pools, d.Revision, key, d)
	}
	return d, nil
}
