package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/gpuadmit/gpuadmit/internal/listener"
	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// TestCostStrandedAllocatedPending: a real Prometheus (Debian's package)
// scrapes the controller, whose leader exports the usage metrics, on the
// real control plane. Two 34 GiB shares on a DRA node of two A100 40GB
// GPUs leave 6 GiB free on each; two pods asking 10 GiB wait, refused by
// the real scheduler. Queried from Prometheus: the 12 GiB free are
// stranded (no pending pod and no typical size of the default policy data,
// the smallest 8 GiB, fits 6 GiB), 68 GiB are allocated to the namespace as
// shares, each GPU holds 34 GiB under its UUID, and 2 pods asking 20 GiB
// wait for GPU. The Prometheus loads deploy/prometheus's rules, which
// read those series.
func TestCostStrandedAllocatedPending(t *testing.T) {
	ctx := context.Background()
	prom := startPrometheus(t, scrapeTarget(t))

	splitSharePool(t, ctx, "cost-dra", "cost")

	a100, _ := allocator.Default().Model("A100-40GB")
	const shareMiB, askMiB = 34 << 10, 10 << 10
	free := a100.MemoryMiB - shareMiB // on each GPU
	want := map[string]float64{
		`gpuadmit_stranded_mib{pool="cost-dra"}`:                                                   float64(2 * free),
		`gpuadmit_free_mib{pool="cost-dra"}`:                                                       float64(2 * free),
		`gpuadmit_capacity_mib{pool="cost-dra"}`:                                                   float64(2 * a100.MemoryMiB),
		`sum(gpuadmit_allocated_mib{pool="cost-dra",namespace="team-a",form="share"})`:             2 * shareMiB,
		`count(gpuadmit_gpu_allocated_mib{pool="cost-dra"} == ` + strconv.Itoa(shareMiB) + `)`:     2,
		`sum(gpuadmit_pending_pods{pool="cost-dra",namespace="team-a",reason="insufficient_gpu"})`: 2,
		`sum(gpuadmit_pending_mib{pool="cost-dra",namespace="team-a",reason="insufficient_gpu"})`:  2 * askMiB,
		// deploy/prometheus's rules, loaded by this Prometheus, read the
		// real series: the stranded share, and its alert pending (it
		// fires after 30 minutes).
		`pool:gpuadmit_stranded_ratio{pool="cost-dra"}`:                                            float64(2*free) / float64(2*a100.MemoryMiB),
		`count(ALERTS{alertname="GPUAdmitStrandedCapacity",pool="cost-dra",alertstate="pending"})`: 1,
	}
	for q, v := range want {
		waitFor(t, q, 60*time.Second, func() (bool, string) {
			got, err := prom.query(q)
			if err != nil {
				return false, err.Error()
			}
			return got == v, fmt.Sprintf("Prometheus says %v, want %v", got, v)
		})
	}
}

// scrapeTarget is host:port of the controller's /metrics: its own port
// when it runs as a process, else this process's controller-runtime
// registry served on a loopback port (the in-process controller registers
// there), until the test ends.
func scrapeTarget(t *testing.T) string {
	t.Helper()
	if u := env.ControllerMetricsURL(); u != "" {
		parsed, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		return parsed.Host
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// prometheus is a Prometheus server the test started.
type prometheus struct{ addr string }

// startPrometheus runs Debian's prometheus, scraping target every second,
// with its data in a temporary directory and its log in the cluster's log
// directory, until the test ends. Without prometheus on the PATH the test
// is skipped, unless GPUADMIT_REQUIRE_TOOLS=1 (make test, whose
// hack/tools.sh installs it).
func startPrometheus(t *testing.T, target string) prometheus {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("GPUADMIT_REQUIRE_TOOLS") == "1" {
			t.Fatal("prometheus not found: hack/tools.sh installs Debian's prometheus package")
		}
		t.Skip("prometheus not found; hack/tools.sh installs Debian's prometheus package")
	}
	dir := t.TempDir()
	config := fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"+
		"rule_files: [%q]\n"+
		"scrape_configs:\n  - job_name: gpuadmit-controller\n    static_configs: [{targets: [%q]}]\n",
		filepath.Join(root, "deploy/prometheus/gpuadmit-rules.yaml"), target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	// Prometheus binds the address it is given itself: a start that finds
	// the port taken since it was chosen is made again on a new one.
	var addr string
	if _, err := listener.Retry("127.0.0.1", 3, func(port int) error {
		addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		return runPrometheus(t, bin, dir, addr)
	}); err != nil {
		t.Fatal(err)
	}
	p := prometheus{addr: addr}
	waitFor(t, "prometheus scrapes the controller", 60*time.Second, func() (bool, string) {
		v, err := p.query(`up{job="gpuadmit-controller"}`)
		if err != nil {
			return false, err.Error()
		}
		return v == 1, fmt.Sprintf("up = %v", v)
	})
	return p
}

// runPrometheus runs bin with the configuration in dir, serving on addr,
// logging to prometheus.log, until the test ends, and waits until it is
// ready; listener.ErrTaken when it exits because addr was taken.
func runPrometheus(t *testing.T, bin, dir, addr string) error {
	t.Helper()
	logPath := filepath.Join(env.LogDir, "prometheus.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logf.Close()
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		select {
		case <-done:
			logf.Close()
			b, _ := os.ReadFile(logPath)
			return listener.Exited(fmt.Errorf("prometheus exited:\n%s", env.Tail("prometheus", 10)), string(b))
		default:
		}
		if resp, err := http.Get("http://" + addr + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Cleanup(stop)
				return nil
			}
		}
	}
	stop()
	return fmt.Errorf("prometheus not ready on %s after 60s:\n%s", addr, env.Tail("prometheus", 10))
}

// query is the value of an instant query whose result is one sample.
func (p prometheus) query(q string) (float64, error) {
	resp, err := http.Get("http://" + p.addr + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, fmt.Errorf("query %s: %w", q, err)
	}
	if body.Status != "success" {
		return 0, fmt.Errorf("query %s: %s", q, body.Error)
	}
	if n := len(body.Data.Result); n != 1 {
		return 0, fmt.Errorf("query %s: %d samples, want 1", q, n)
	}
	s, _ := body.Data.Result[0].Value[1].(string)
	return strconv.ParseFloat(s, 64)
}

// splitSharePool makes the DRA share pool pool of one node with two A100
// 40GB GPUs (deploy/dra's DeviceClasses installed), binds two 34 GiB shares
// there, one per GPU, and leaves two 10 GiB shares of team-a waiting: the
// pods are named prefix-34a, -34b, -10a and -10b, and deleted after the test.
func splitSharePool(t *testing.T, ctx context.Context, pool, prefix string) {
	t.Helper()
	draNamespace(t, ctx, pool)
	draPoolNode(t, ctx, pool+"-0", pool, 2)
	share := func(name, gib string) *corev1.Pod {
		p := gpuPod("team-a", prefix+"-"+name, map[string]string{"gpuadmit.io/gpu-memory": gib})
		p.Annotations = map[string]string{"gpuadmit.io/model": "A100-40GB", "gpuadmit.io/backend": "shared"}
		return p
	}
	held := []*corev1.Pod{share("34a", "34Gi"), share("34b", "34Gi")}
	waiting := []*corev1.Pod{share("10a", "10Gi"), share("10b", "10Gi")}
	t.Cleanup(func() { deleteAll(context.Background(), "team-a", append(held, waiting...)...) })
	waitAdmitted(t, ctx, "the webhook sees the DRA pool", held[0])
	for _, p := range held {
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		waitState(t, ctx, p, "node "+pool+"-0")
	}
	for _, p := range waiting {
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		waitState(t, ctx, p, "unschedulable")
	}
}
