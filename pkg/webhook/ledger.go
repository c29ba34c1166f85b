package webhook

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// ledgerTTL is how long an admission is counted while the cache does not
// show its pod: the cache shows a created pod within a second or so; a pod
// that never comes (the API server refused it after the webhook: quota,
// validation, a later webhook) stops counting after this.
const ledgerTTL = 30 * time.Second

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
func (l *ledger) seen(pod *corev1.Pod) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := l.find(pod.Namespace, func(a admitted) bool { return a.name != "" && a.name == pod.Name })
	if i < 0 && pod.GenerateName != "" {
		i = l.find(pod.Namespace, func(a admitted) bool { return a.name == "" && a.generateName == pod.GenerateName })
	}
	if i >= 0 {
		l.entries = append(l.entries[:i], l.entries[i+1:]...)
	}
}

func (l *ledger) find(namespace string, match func(admitted) bool) int {
	for i, a := range l.entries {
		if a.namespace == namespace && match(a) {
			return i
		}
	}
	return -1
}
