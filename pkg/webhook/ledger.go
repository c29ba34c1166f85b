package webhook

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// ledgerTTL is how long at most an admission is counted while the cache
// does not show its pod: the cache shows a created pod within a second or
// so. A pod that never comes (the API server refused it after the webhook:
// quota, validation, a later webhook) stops counting sooner once the cache
// shows a pod admitted after it (ledgerOvertake); this bounds the rest, on
// a cluster where no pod comes after it.
const ledgerTTL = 30 * time.Second

// ledgerOvertake is how much earlier than a pod the cache now shows an
// admission must have been for its pod to count as refused. The Pod
// informer delivers pods in the order the API server wrote them; the API
// server writes a pod at the end of its admission chain (later webhooks,
// ResourceQuota, validation), which takes milliseconds, not seconds. So a
// pod admitted this long before one the cache shows, and not shown itself,
// was refused after the webhook, or is stuck in a later webhook that takes
// longer than this: it then goes uncounted until the cache shows it
// (the tally counts it from there), which can only send a pod to a pool
// that is fuller than it looked, never away from one with room.
const ledgerOvertake = 2 * time.Second

// ledger remembers what this replica admitted and its pod cache has not
// shown yet, so that a burst of pods does not all land on one stale count.
// It is safe for concurrent use.
type ledger struct {
	clock clock.PassiveClock
	ttl   time.Duration

	mu      sync.Mutex
	entries []admitted
}

// admitted is one pod admitted to a pool. On CREATE a controller's pod has
// no name yet, only generateName, so it is matched by that.
type admitted struct {
	namespace, name, generateName string
	pool                          string
	demand                        map[string]int64
	at                            time.Time
}

func newLedger(clk clock.PassiveClock, ttl time.Duration) *ledger {
	return &ledger{clock: clk, ttl: ttl}
}

// add counts pod's demand against pool until the cache shows the pod.
func (l *ledger) add(pod *corev1.Pod, pool string, demand map[string]int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, admitted{namespace: pod.Namespace, name: pod.Name, generateName: pod.GenerateName,
		pool: pool, demand: demand, at: l.clock.Now()})
}

// pending sums the demand admitted to pool that the cache has not shown,
// forgetting admissions older than the TTL.
func (l *ledger) pending(pool string) map[string]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expire()
	out := map[string]int64{}
	for _, a := range l.entries {
		if a.pool != pool {
			continue
		}
		for r, q := range a.demand {
			out[r] += q
		}
	}
	return out
}

func (l *ledger) expire() {
	now := l.clock.Now()
	kept := l.entries[:0]
	for _, a := range l.entries {
		if now.Sub(a.at) < l.ttl {
			kept = append(kept, a)
		}
	}
	clear(l.entries[len(kept):])
	l.entries = kept
}

// seen drops the admission of a pod the cache now shows: the one with its
// name, else the oldest with its generateName. A pod another replica
// admitted under the same generateName may take this replica's entry; its
// own pod then goes uncounted until the cache shows it, for a moment.
//
// It also drops, in every namespace, the admissions made more than
// ledgerOvertake before the one it matched: their pods would have been
// written, and shown, before this one (see ledgerOvertake), so the API
// server refused them after the webhook. Without this a pod refused by
// its namespace's ResourceQuota or a later webhook held its pool's room
// against every namespace for the whole ledgerTTL, and a controller that
// retries a refused create added a new such entry on every retry.
func (l *ledger) seen(pod *corev1.Pod) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := l.find(pod.Namespace, func(a admitted) bool { return a.name != "" && a.name == pod.Name })
	if i < 0 && pod.GenerateName != "" {
		i = l.find(pod.Namespace, func(a admitted) bool { return a.name == "" && a.generateName == pod.GenerateName })
	}
	if i < 0 {
		return
	}
	cutoff := l.entries[i].at.Add(-ledgerOvertake)
	kept := l.entries[:0]
	for j, a := range l.entries {
		if j != i && !a.at.Before(cutoff) {
			kept = append(kept, a)
		}
	}
	clear(l.entries[len(kept):])
	l.entries = kept
}

func (l *ledger) find(namespace string, match func(admitted) bool) int {
	for i, a := range l.entries {
		if a.namespace == namespace && match(a) {
			return i
		}
	}
	return -1
}
