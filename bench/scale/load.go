package scale

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuadmit/gpuadmit/bench/admission"
)

// load is one phase's pods, created by concurrent clients, closed loop.
type load struct {
	namespace, prefix string
	mix               admission.Mix
	first, pods       int // pod i of the phase is the mix's pod first+i
	clients           []kubernetes.Interface
	dryRun            bool // the API server admits the pods but stores none
}

// loadOutcome is what the clients saw; the webhook's own figures come
// from its metrics.
type loadOutcome struct {
	created int
	errors  []string
	wall    time.Duration
}

func (l load) run(ctx context.Context) loadOutcome {
	var next atomic.Int64
	var mu sync.Mutex
	var out loadOutcome
	opts := metav1.CreateOptions{}
	if l.dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, cs := range l.clients {
		wg.Go(func() {
			created := 0
			var errs []string
			for {
				i := int(next.Add(1)) - 1
				if i >= l.pods || ctx.Err() != nil {
					break
				}
				p := l.mix.Pod(l.namespace, fmt.Sprintf("%s-%06d", l.prefix, i), l.first+i)
				if _, err := cs.CoreV1().Pods(l.namespace).Create(ctx, p, opts); err != nil {
					errs = append(errs, fmt.Sprintf("%s: %v", p.Name, err))
					continue
				}
				created++
			}
			mu.Lock()
			out.created += created
			out.errors = append(out.errors, errs...)
			mu.Unlock()
		})
	}
	wg.Wait()
	out.wall = time.Since(start)
	return out
}
