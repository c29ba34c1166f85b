package admission

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/policies"
)

// opaPolicy is the Rego OPA serves; OPAPath is where the API server sends reviews.
//
//go:embed opa/admission.rego
var opaPolicy []byte

// OPAPath is the v0 data API path of the review rule: the v0 API takes the
// AdmissionReview as input and answers the rule's value unwrapped, which is
// what the API server reads (the v1 API wraps both in input/result).
const OPAPath = "/v0/data/gpuadmit/admission/review"

// opaConfig gives OPA's request-duration histogram buckets fine enough
// around a millisecond to compare with gpuadmit's (OPA's default jumps from 1 to 10 ms).
const opaConfig = `server:
  metrics:
    prom:
      http_request_duration_seconds:
        buckets: [0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 1]
`

// opaServer is `opa run --server` with TLS, a child process.
type opaServer struct {
	*child
	base   string // https://host:port
	client *http.Client
}

// startOPA runs bin serving the benchmark policy on host:port with the
// serving certificate in certDir, logging to logDir/opa.log, and waits until
// its /health answers.
func startOPA(bin, host string, port int, certDir string, caPEM []byte, logDir string) (*opaServer, error) {
	policy := filepath.Join(logDir, "opa-admission.rego")
	if err := os.WriteFile(policy, opaPolicy, 0o644); err != nil {
		return nil, err
	}
	config := filepath.Join(logDir, "opa-config.yaml")
	if err := os.WriteFile(config, []byte(opaConfig), 0o644); err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("%s:%d", host, port)
	// Request logs at error level: no access log line per review (gpuadmit
	// writes one decision line per pod; OPA is given the cheaper setting).
	c, err := startChild(bin, "opa", logDir, "run", "--server", "--addr", addr, "--config-file", config,
		"--tls-cert-file", filepath.Join(certDir, "tls.crt"), "--tls-private-key-file", filepath.Join(certDir, "tls.key"),
		"--log-level", "error", "--log-level-request", "error", "--skip-version-check", policy)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	s := &opaServer{child: c, base: "https://" + addr,
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}}
	if err := s.waitHealthy(30 * time.Second); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

func (s *opaServer) waitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if err := s.exited(); err != nil {
			return err
		}
		if resp, err := s.client.Get(s.base + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("opa not healthy after %s", timeout)
}

// put writes a document into OPA's data at path (/v1/data/<path>), as kube-mgmt does.
func (s *opaServer) put(ctx context.Context, path string, doc any) error {
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.base+"/v1/data/"+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("put opa data %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("put opa data %s: %s: %s", path, resp.Status, body)
	}
	return nil
}

// families reads OPA's /metrics (Prometheus text).
func (s *opaServer) families(ctx context.Context) (families, error) {
	raw, err := Get(ctx, s.client, s.base+"/metrics")
	if err != nil {
		return nil, fmt.Errorf("read OPA's /metrics: %w", err)
	}
	return parseText(raw)
}

// ClusterData is what OPA's policy reads from data.cluster: the pools
// gpuadmit's inventory builds from the nodes (each with its nodes' GPU
// allocatable, for the fit check), the namespaces' labels, the default
// policies' class → PriorityClass map, and the PriorityClasses' values (as
// kube-mgmt would replicate them).
func ClusterData(nodes []corev1.Node, namespaces []corev1.Namespace, pcs []schedulingv1.PriorityClass) (map[string]any, error) {
	inv := inventory.Build(nodes, allocator.Default())
	pools := make([]map[string]any, 0, len(inv.Pools))
	for _, p := range inv.Pools {
		var m map[string]any
		if err := roundTrip(p, &m); err != nil {
			return nil, err
		}
		var ns []any
		if err := roundTrip(p.Nodes, &ns); err != nil {
			return nil, err
		}
		m["nodes"] = ns
		pools = append(pools, m)
	}
	nss := map[string]any{}
	for _, n := range namespaces {
		labels := map[string]string{}
		maps.Copy(labels, n.Labels)
		nss[n.Name] = map[string]any{"labels": labels}
	}
	classes, err := priorityClasses()
	if err != nil {
		return nil, err
	}
	values := map[string]any{}
	for _, pc := range pcs {
		policy := corev1.PreemptLowerPriority
		if pc.PreemptionPolicy != nil {
			policy = *pc.PreemptionPolicy
		}
		values[pc.Name] = map[string]any{"value": pc.Value, "preemptionPolicy": policy}
	}
	var doc map[string]any
	err = roundTrip(map[string]any{"pools": pools, "namespaces": nss, "priorityClasses": classes, "priorityClassValues": values}, &doc)
	return doc, err
}

// priorityClasses reads gpuadmit.config.priorityClasses from the embedded policies' data.
func priorityClasses() (map[string]string, error) {
	b, err := policies.FS.ReadFile("data.yaml")
	if err != nil {
		return nil, err
	}
	var d struct {
		Gpuadmit struct {
			Config struct {
				PriorityClasses map[string]string `json:"priorityClasses"`
			} `json:"config"`
		} `json:"gpuadmit"`
	}
	if err := yaml.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("read policies/data.yaml: %w", err)
	}
	return d.Gpuadmit.Config.PriorityClasses, nil
}

func roundTrip(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
