package e2e

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

// TestConcurrentCreates: 200 GPU pods from 20 clients at once are all
// admitted and mutated with no webhook error, and the API server's own
// admission latency for gpuadmit is reported.
func TestConcurrentCreates(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{}
	ns.Name = "load"
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		clearPods(t, ctx, ns.Name) // before the namespace: later tests need these GPUs free
		_ = env.Client.Delete(ctx, ns)
	})
	before := webhookMetrics(t, ctx)
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for c := 0; c < 20; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			cl, err := client.New(env.Config, client.Options{Scheme: env.Client.Scheme()})
			if err != nil {
				errs <- err
				return
			}
			for i := 0; i < 10; i++ {
				p := gpuPod("load", fmt.Sprintf("p-%02d-%02d", c, i), map[string]string{"gpuadmit.io/gpu-memory": fmt.Sprintf("%dGi", 1+(c+i)%12)})
				if err := cl.Create(ctx, p); err != nil {
					errs <- fmt.Errorf("%s: %w", p.Name, err)
				} else if p.Annotations[record.AnnotationDecision] == "" {
					errs <- fmt.Errorf("%s admitted without a decision", p.Name)
				}
			}
		}(c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	after := webhookMetrics(t, ctx)
	count, sum := after["count"]-before["count"], after["sum"]-before["sum"]
	if count < 200 {
		t.Errorf("apiserver counted %v admission calls to gpuadmit, want at least 200", count)
	}
	if failed := after["errors"] - before["errors"]; failed != 0 {
		t.Errorf("apiserver recorded %v failed calls to gpuadmit", failed)
	}
	t.Logf("apiserver_admission_webhook_admission_duration_seconds{name=pods.mutate.gpuadmit.io}: %v calls, mean %.2f ms, p50 <= %s s, p99 <= %s s",
		count, 1000*sum/max(count, 1), quantile(after, before, 0.50), quantile(after, before, 0.99))
	n, mean := serverSide(t)
	t.Logf("gpuadmit_webhook_review_duration_seconds{webhook=mutate} (server side, this process, whole run): %d reviews, mean %.2f ms", n, 1000*mean)
}

// serverSide reads gpuadmit's own review latency from the in-process registry.
func serverSide(t *testing.T) (uint64, float64) {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "gpuadmit_webhook_review_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == "mutate" {
					h := m.GetHistogram()
					return h.GetSampleCount(), h.GetSampleSum() / float64(max(h.GetSampleCount(), 1))
				}
			}
		}
	}
	return 0, 0
}

// webhookMetrics reads the API server's /metrics for gpuadmit's mutating
// webhook: duration count, sum and buckets ("le=<bound>"), and failed calls.
func webhookMetrics(t *testing.T, ctx context.Context) map[string]float64 {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("read apiserver /metrics: %v", err)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `name="pods.mutate.gpuadmit.io"`) || !strings.Contains(line, `type="admit"`) && !strings.Contains(line, "rejection") {
			continue
		}
		v, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		switch {
		case strings.HasPrefix(line, "apiserver_admission_webhook_admission_duration_seconds_count"):
			out["count"] += v
		case strings.HasPrefix(line, "apiserver_admission_webhook_admission_duration_seconds_sum"):
			out["sum"] += v
		case strings.HasPrefix(line, "apiserver_admission_webhook_admission_duration_seconds_bucket"):
			out["le="+between(line, `le="`, `"`)] += v
		case strings.HasPrefix(line, "apiserver_admission_webhook_rejection_count") && !strings.Contains(line, `error_type="no_error"`):
			out["errors"] += v
		}
	}
	return out
}

func between(s, from, to string) string {
	i := strings.Index(s, from)
	if i < 0 {
		return ""
	}
	s = s[i+len(from):]
	return s[:strings.Index(s, to)]
}

// quantile is the smallest bucket bound holding q of the calls between two readings.
func quantile(after, before map[string]float64, q float64) string {
	total := after["count"] - before["count"]
	best, bound := "+Inf", 1e18
	for k, v := range after {
		le, ok := strings.CutPrefix(k, "le=")
		if !ok || le == "+Inf" {
			continue
		}
		b, _ := strconv.ParseFloat(le, 64)
		if v-before[k] >= q*total && b < bound {
			best, bound = le, b
		}
	}
	return best
}
