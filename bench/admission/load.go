package admission

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// NewClients returns n clientsets, each with its own connection to the API
// server (a dialer of its own keeps client-go from sharing one transport),
// speaking protobuf as controllers do, and never throttled on the client.
func NewClients(cfg *rest.Config, n int) ([]kubernetes.Interface, error) {
	out := make([]kubernetes.Interface, n)
	for i := range out {
		c := rest.CopyConfig(cfg)
		c.QPS, c.Burst = 1e6, 1e6
		c.ContentType = "application/vnd.kubernetes.protobuf"
		c.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
		c.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		c.Timeout = 60 * time.Second
		cs, err := kubernetes.NewForConfig(c)
		if err != nil {
			return nil, err
		}
		out[i] = cs
	}
	return out, nil
}

// load is one run: pods created by concurrent clients, closed loop.
type load struct {
	namespace string
	prefix    string // pod names are <prefix>-<index>
	first     int    // index of the first pod, which picks its shape
	mix       Mix
	pods      int
	clients   []kubernetes.Interface
	dryRun    bool
}

// outcome is what one run measured.
type outcome struct {
	latencies []time.Duration // successful creates
	errors    []string        // one per failed create
	mutated   int             // created pods that carry gpuadmit.io/decision or the patch configuration's annotation
	wall      time.Duration
}

// run creates the pods, each client taking the next pod as soon as its last
// Create returned, and times every Create from call to response.
func (l load) run(ctx context.Context) outcome {
	var next atomic.Int64
	var mu sync.Mutex
	var out outcome
	opts := metav1.CreateOptions{}
	if l.dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, cs := range l.clients {
		wg.Go(func() {
			var lat []time.Duration
			var errs []string
			mutated := 0
			for {
				i := int(next.Add(1)) - 1
				if i >= l.pods || ctx.Err() != nil {
					break
				}
				p := l.mix.Pod(l.namespace, fmt.Sprintf("%s-%05d", l.prefix, i), l.first+i)
				t := time.Now()
				got, err := cs.CoreV1().Pods(l.namespace).Create(ctx, p, opts)
				d := time.Since(t)
				if err != nil {
					errs = append(errs, fmt.Sprintf("%s: %v", p.Name, err))
					continue
				}
				lat = append(lat, d)
				if got.Annotations["gpuadmit.io/decision"] != "" || got.Annotations[AnnotationPatched] != "" {
					mutated++
				}
			}
			mu.Lock()
			out.latencies = append(out.latencies, lat...)
			out.errors = append(out.errors, errs...)
			out.mutated += mutated
			mu.Unlock()
		})
	}
	wg.Wait()
	out.wall = time.Since(start)
	return out
}

// createOne creates (or dry-runs) a single benchmark pod and returns the result.
func createOne(ctx context.Context, cs kubernetes.Interface, namespace, name string, i int, dryRun bool) (*corev1.Pod, error) {
	opts := metav1.CreateOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return cs.CoreV1().Pods(namespace).Create(ctx, Pod(namespace, name, i), opts)
}
