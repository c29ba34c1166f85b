package scale

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// initialTimestamp is the GFD timestamp every node is created with.
const initialTimestamp = "1767225600"

// churner rewrites GFD's timestamp label on every node once per period,
// as GFD does on every GPU node: len(nodes)/period writes a second. Each
// period the nodes come in a new random order at evenly spread times,
// each jittered within its slot, so no node is rewritten on a fixed beat
// and the rate holds steady.
type churner struct {
	cs     kubernetes.Interface
	nodes  []string
	period time.Duration
	// writes and errors count the label patches sent, done and failed.
	writes, errors atomic.Int64
	lastErr        atomic.Value // string
}

func newChurner(cs kubernetes.Interface, nodes []string, period time.Duration) *churner {
	return &churner{cs: cs, nodes: nodes, period: period}
}

// churnWorkers send the patches; the dispatcher waits for a free one, so
// when the API server falls behind the rate falls (and the report says so)
// rather than requests pile up.
const churnWorkers = 16

// run churns until ctx ends.
func (c *churner) run(ctx context.Context) {
	work := make(chan string)
	var wg sync.WaitGroup
	for range churnWorkers {
		wg.Go(func() {
			for name := range work {
				c.write(ctx, name)
			}
		})
	}
	defer func() { close(work); wg.Wait() }()
	slot := c.period / time.Duration(len(c.nodes))
	for start := time.Now(); ctx.Err() == nil; start = start.Add(c.period) {
		order := rand.Perm(len(c.nodes))
		for j, i := range order {
			at := start.Add(time.Duration(j)*slot + rand.N(slot+1))
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(at)):
			}
			select {
			case <-ctx.Done():
				return
			case work <- c.nodes[i]:
			}
		}
	}
}

// write patches the label as GFD (through NFD's master) rewrites it, to
// the current time: in nanoseconds where GFD writes seconds, so that every
// write changes the Node even at a test's short period.
func (c *churner) write(ctx context.Context, name string) {
	body := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, LabelTimestamp, strconv.FormatInt(time.Now().UnixNano(), 10))
	if _, err := c.cs.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		if ctx.Err() == nil {
			c.errors.Add(1)
			c.lastErr.Store(fmt.Sprintf("patch %s: %v", name, err))
		}
		return
	}
	c.writes.Add(1)
}
