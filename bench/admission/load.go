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

// Load is one run: pods created by concurrent clients, closed loop.
type Load struct {
	Namespace string
	Prefix    string // pod names are <prefix>-<index>
	First     int    // index of the first pod, which picks its shape
	Mix       Mix
	Pods      int
	Clients   []kubernetes.Interface
	DryRun    bool // the API server admits the pods but stores none
}

// Outcome is what one run measured.
type Outcome struct {
	Latencies []time.Duration // successful creates
	Errors    []string        // one per failed create
	Mutated   int             // created pods that carry gpuadmit.io/decision or the patch configuration's annotation
	Wall      time.Duration
}

// Run creates the pods, each client taking the next pod as soon as its last
// Create returned, and times every Create from call to response.
func (l Load) Run(ctx context.Context) Outcome {
	var next atomic.Int64
	var mu sync.Mutex
	var out Outcome
	opts := metav1.CreateOptions{}
	if l.DryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, cs := range l.Clients {
		wg.Go(func() {
			var lat []time.Duration
			var errs []string
			mutated := 0
			for {
				i := int(next.Add(1)) - 1
				if i >= l.Pods || ctx.Err() != nil {
					break
				}
				p := l.Mix.Pod(l.Namespace, fmt.Sprintf("%s-%05d", l.Prefix, i), l.First+i)
				t := time.Now()
				got, err := cs.CoreV1().Pods(l.Namespace).Create(ctx, p, opts)
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
			out.Latencies = append(out.Latencies, lat...)
			out.Errors = append(out.Errors, errs...)
			out.Mutated += mutated
			mu.Unlock()
		})
	}
	wg.Wait()
	out.Wall = time.Since(start)
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
