package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpuadmit/gpuadmit/certs"
	"github.com/gpuadmit/gpuadmit/pkg/mutate"
)

var localhost = certs.Options{IPs: []net.IP{net.ParseIP("127.0.0.1")}}

// TestCertificateRotationMidTraffic replaces the serving certificate on disk
// while four clients keep sending reviews: no request fails, new connections
// get the new certificate, and the expiry gauge follows it.
func TestCertificateRotationMidTraffic(t *testing.T) {
	dir := t.TempDir()
	b, err := certs.Generate(localhost)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cw, err := certwatcher.New(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	cw = cw.WithWatchInterval(50 * time.Millisecond)
	cw.RegisterCallback(observeExpiry)
	go func() { _ = cw.Start(ctx) }()
	client := trustingClient(b.CACert)
	url := serveWebhook(t, ctx, cw.GetCertificate, client)

	// Rotate: a new serving certificate under the same CA, valid for a
	// different time so that the expiry gauge moves.
	ca, caKey, err := b.ParseCA()
	if err != nil {
		t.Fatal(err)
	}
	rotated := localhost
	rotated.Validity = 90 * 24 * time.Hour
	cert, key, err := certs.Sign(ca, caKey, rotated)
	if err != nil {
		t.Fatal(err)
	}
	newLeaf := parseCert(t, cert)

	var (
		sent, failed, afterRotation atomic.Int64
		mu                          sync.Mutex
		firstErr                    error
	)
	deadline := time.Now().Add(20 * time.Second)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for afterRotation.Load() < 100 && time.Now().Before(deadline) {
				serial, err := review(client, url)
				sent.Add(1)
				if err != nil {
					failed.Add(1)
					mu.Lock()
					firstErr = err
					mu.Unlock()
					continue
				}
				if serial.Cmp(newLeaf.SerialNumber) == 0 {
					afterRotation.Add(1)
				}
			}
		})
	}
	waitFor(t, "50 reviews before the rotation", func() bool { return sent.Load() >= 50 })
	if err := certs.WriteFileAtomic(filepath.Join(dir, "tls.key"), key); err != nil {
		t.Fatal(err)
	}
	if err := certs.WriteFileAtomic(filepath.Join(dir, "tls.crt"), cert); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	if n := failed.Load(); n != 0 {
		t.Errorf("%d of %d reviews failed during the rotation; first: %v", n, sent.Load(), firstErr)
	}
	if n := afterRotation.Load(); n < 100 {
		t.Errorf("%d reviews saw the new certificate (serial %x) within 20s, want 100", n, newLeaf.SerialNumber)
	}
	want := float64(newLeaf.NotAfter.Unix())
	waitFor(t, "the expiry gauge to follow the new certificate", func() bool { return gauge(t) == want })
}

// TestObserveExpiry reads the expiry from the leaf, parsed or not.
func TestObserveExpiry(t *testing.T) {
	b, err := certs.Generate(certs.Options{IPs: localhost.IPs, Validity: 48 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	leaf := parseCert(t, b.Cert)
	tests := map[string]tls.Certificate{
		"leaf parsed":     {Certificate: [][]byte{leaf.Raw}, Leaf: leaf},
		"leaf not parsed": {Certificate: [][]byte{leaf.Raw}},
	}
	for name, c := range tests {
		t.Run(name, func(t *testing.T) {
			certExpiry.Set(0)
			observeExpiry(c)
			if got, want := gauge(t), float64(leaf.NotAfter.Unix()); got != want {
				t.Errorf("expiry gauge %v, want %v (the certificate's NotAfter)", got, want)
			}
		})
	}
}

// serveWebhook serves the mutating webhook over TLS with getCert on a free
// port of 127.0.0.1 until ctx ends, and returns its URL once client gets
// answers (UPDATE reviews, which it allows without deciding anything).
func serveWebhook(t *testing.T, ctx context.Context, getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error), client *http.Client) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	scheme := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(scheme))
	srv := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, TLSOpts: TLSOptions(getCert)})
	h := mutate.NewHandler(mutate.NewMutator(nil, nil, mutate.MutatorOptions{}), nil, scheme, mutate.HandlerOptions{})
	srv.Register(MutatePath, &admission.Webhook{Handler: h})
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = srv.Start(ctx) }()
	t.Cleanup(func() { <-stopped })
	url := fmt.Sprintf("https://127.0.0.1:%d%s", port, MutatePath)
	waitFor(t, "the webhook server to answer", func() bool {
		_, err := review(client, url)
		return err == nil
	})
	return url
}

// trustingClient trusts only caPEM and opens a connection per request, so
// that each request sees the certificate served at that moment.
func trustingClient(caPEM []byte) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		DisableKeepAlives: true,
	}}
}

var reviewBody = func() []byte {
	pod, _ := json.Marshal(corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}})
	old := bytes.Clone(pod)
	b, _ := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "rotation", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Namespace: "ns", Operation: admissionv1.Update, Object: runtime.RawExtension{Raw: pod}, OldObject: runtime.RawExtension{Raw: old}},
	})
	return b
}()

// review sends one UPDATE review and returns the serving certificate's serial.
func review(client *http.Client, url string) (*big.Int, error) {
	resp, err := client.Post(url, "application/json", bytes.NewReader(reviewBody))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var ar admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&ar); err != nil {
		return nil, fmt.Errorf("HTTP %d: %w", resp.StatusCode, err)
	}
	if ar.Response == nil || !ar.Response.Allowed {
		return nil, fmt.Errorf("HTTP %d: review not allowed: %+v", resp.StatusCode, ar.Response)
	}
	return resp.TLS.PeerCertificates[0].SerialNumber, nil
}

func parseCert(t testing.TB, certPEM []byte) *x509.Certificate {
	t.Helper()
	blk, _ := pem.Decode(certPEM)
	if blk == nil {
		t.Fatal("certificate is not PEM")
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func gauge(t testing.TB) float64 {
	t.Helper()
	var m dto.Metric
	if err := certExpiry.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// waitFor polls cond for at most 20 seconds.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s after 20s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHTTP2IsOff: a client that offers HTTP/2 first is answered over
// HTTP/1.1, so the server never runs HTTP/2's stream handling.
func TestHTTP2IsOff(t *testing.T) {
	b, err := certs.Generate(localhost)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(b.Cert, b.Key)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url := serveWebhook(t, ctx, func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil }, trustingClient(b.CACert))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.CACert)
	h2 := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, NextProtos: []string{"h2", "http/1.1"}}, ForceAttemptHTTP2: true,
	}}
	resp, err := h2.Post(url, "application/json", bytes.NewReader(reviewBody))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 1 || resp.TLS == nil || resp.TLS.NegotiatedProtocol == "h2" {
		t.Errorf("answered over %s (ALPN %q), want HTTP/1.1", resp.Proto, resp.TLS.NegotiatedProtocol)
	}
}
