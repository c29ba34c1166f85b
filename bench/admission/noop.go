package admission

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// NoopPath is where the no-op webhook serves.
const NoopPath = "/noop-v1-pod"

// noop decodes the pod, as any webhook that looks at pods must, and allows it unchanged.
type noop struct{ decoder cradmission.Decoder }

var _ cradmission.Handler = (*noop)(nil)

func (n *noop) Handle(_ context.Context, req cradmission.Request) cradmission.Response {
	pod := &corev1.Pod{}
	if err := n.decoder.Decode(req, pod); err != nil {
		return cradmission.Errored(http.StatusBadRequest, err)
	}
	return cradmission.Allowed("")
}

// startNoop serves the no-op webhook on its own controller-runtime
// webhook.Server, set up as gpuadmit's (pkg/webhook): the same certificate
// directory read through a certwatcher, the same TLS defaults, the handler
// wrapped in admission.Webhook with RecoverPanic. It stops when ctx ends.
func startNoop(ctx context.Context, host string, port int, certDir string) (<-chan error, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	cw, err := certwatcher.New(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	if err != nil {
		return nil, fmt.Errorf("serving certificate in %s: %w", certDir, err)
	}
	srv := webhook.NewServer(webhook.Options{
		Host: host, Port: port, CertDir: certDir,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = cw.GetCertificate }},
	})
	recoverPanic := true
	srv.Register(NoopPath, &cradmission.Webhook{Handler: &noop{decoder: cradmission.NewDecoder(scheme)}, RecoverPanic: &recoverPanic})
	done := make(chan error, 2)
	go func() { done <- cw.Start(ctx) }()
	go func() { done <- srv.Start(ctx) }()
	check := srv.StartedChecker()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if check(&http.Request{}) == nil {
			return done, nil
		}
	}
	return done, fmt.Errorf("no-op webhook not serving on %s:%d after 10s", host, port)
}
