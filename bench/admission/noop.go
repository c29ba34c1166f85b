package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	gpuwebhook "github.com/gpuadmit/gpuadmit/pkg/webhook"
)

// NoopPath is where the no-op webhook serves.
const NoopPath = "/noop-v1-pod"

// NoopCommand is the subcommand of the benchmark's executable that runs
// ServeNoop; Run starts the no-op webhook as that executable (through a
// symlink of this name, so /proc tells it from the clients) with
// NoopOptions.Args. gpuadmit-bench has it, hidden; this package's tests
// dispatch it in TestMain.
const NoopCommand = "noop-webhook"

// NoopOptions configure ServeNoop.
type NoopOptions struct {
	// Host and Port are where the webhook listens.
	Host string
	Port int
	// CertDir holds tls.crt and tls.key.
	CertDir string
	// MetricsAddr serves controller-runtime's /metrics; "0" disables it.
	MetricsAddr string
	// ReplayPatch is the file ReplayPath answers from (a JSON patch); it is
	// read at the first review, so it may be written after the server starts.
	ReplayPatch string
}

// Args are the command-line arguments of NoopCommand for o.
func (o NoopOptions) Args() []string {
	return []string{NoopCommand, "--host=" + o.Host, fmt.Sprintf("--port=%d", o.Port),
		"--cert-dir=" + o.CertDir, "--metrics-bind-address=" + o.MetricsAddr, "--replay-patch=" + o.ReplayPatch}
}

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

// PatchPath is where the no-op server answers as a minimal mutating
// webhook: the pod decoded, one annotation added (AnnotationPatched). What
// it costs beyond the no-op is what the API server spends on any patch,
// whatever it writes: the pod encoded, patched and decoded again, and
// admitted once more (the floor under gpuadmit's own cost).
const PatchPath = "/patch-v1-pod"

// AnnotationPatched is the annotation PatchPath adds.
const AnnotationPatched = "bench.gpuadmit.io/patched"

// patcher is the handler at PatchPath.
type patcher struct{ decoder cradmission.Decoder }

func (p *patcher) Handle(_ context.Context, req cradmission.Request) cradmission.Response {
	pod := &corev1.Pod{}
	if err := p.decoder.Decode(req, pod); err != nil {
		return cradmission.Errored(http.StatusBadRequest, err)
	}
	if pod.Annotations == nil {
		return cradmission.Patched("", jsonpatch.Operation{Operation: "add", Path: "/metadata/annotations",
			Value: map[string]string{AnnotationPatched: "true"}})
	}
	return cradmission.Patched("", jsonpatch.Operation{Operation: "add",
		Path: "/metadata/annotations/" + strings.ReplaceAll(AnnotationPatched, "/", "~1"), Value: "true"})
}

// ReplayPath is where the no-op server answers every pod with one fixed
// patch: gpuadmit's own for the run's template pod (captureReplay). What
// it costs beyond the no-op is what gpuadmit's changes cost the API server
// and the pod's watchers, without gpuadmit deciding anything; gpuadmit's
// cost beyond it is its decision.
const ReplayPath = "/replay-v1-pod"

// replayer is the handler at ReplayPath.
type replayer struct {
	decoder cradmission.Decoder
	file    string

	mu    sync.Mutex
	bytes []byte // the patch as the file holds it, checked
}

// patch reads the file once, at the first review, and answers with its
// bytes, not encoded again per review (as gpuadmit encodes its patch
// once, marshalPatch): the file holds the operations as
// json.Marshal([]jsonpatch.Operation) writes them, the bytes
// controller-runtime's Response.Complete would make of them.
func (r *replayer) patch() ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bytes != nil {
		return r.bytes, nil
	}
	if r.file == "" {
		return nil, fmt.Errorf("no replay patch: the server was started without --replay-patch")
	}
	b, err := os.ReadFile(r.file)
	if err != nil {
		return nil, fmt.Errorf("replay patch: %w", err)
	}
	var ops []jsonpatch.Operation
	if err := json.Unmarshal(b, &ops); err != nil {
		return nil, fmt.Errorf("replay patch %s: %w", r.file, err)
	}
	if len(ops) == 0 {
		return nil, fmt.Errorf("replay patch %s is empty", r.file)
	}
	r.bytes = b
	return b, nil
}

func (r *replayer) Handle(_ context.Context, req cradmission.Request) cradmission.Response {
	pod := &corev1.Pod{}
	if err := r.decoder.Decode(req, pod); err != nil {
		return cradmission.Errored(http.StatusBadRequest, err)
	}
	patch, err := r.patch()
	if err != nil {
		return cradmission.Errored(http.StatusInternalServerError, err)
	}
	resp := cradmission.Allowed("")
	pt := admissionv1.PatchTypeJSONPatch
	resp.Patch, resp.PatchType = patch, &pt
	return resp
}

// ServeNoop is the no-op webhook process: a controller-runtime
// webhook.Server set up as gpuadmit's (pkg/webhook): the same certificate
// directory read through a certwatcher, the same TLS defaults, the handler
// wrapped in admission.Webhook with RecoverPanic; and controller-runtime's
// metrics server, as gpuadmit serves it (controller_runtime_webhook_latency_seconds).
// It logs to stderr and serves until ctx ends.
func ServeNoop(ctx context.Context, o NoopOptions) error {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(false)))
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	cw, err := certwatcher.New(filepath.Join(o.CertDir, "tls.crt"), filepath.Join(o.CertDir, "tls.key"))
	if err != nil {
		return fmt.Errorf("serving certificate in %s: %w", o.CertDir, err)
	}
	srv := webhook.NewServer(webhook.Options{
		Host: o.Host, Port: o.Port, CertDir: o.CertDir,
		TLSOpts: gpuwebhook.TLSOptions(cw.GetCertificate), // as gpuadmit serves: HTTP/1.1
	})
	recoverPanic := true
	srv.Register(NoopPath, &cradmission.Webhook{Handler: &noop{decoder: cradmission.NewDecoder(scheme)}, RecoverPanic: &recoverPanic})
	srv.Register(PatchPath, &cradmission.Webhook{Handler: &patcher{decoder: cradmission.NewDecoder(scheme)}, RecoverPanic: &recoverPanic})
	srv.Register(ReplayPath, &cradmission.Webhook{Handler: &replayer{decoder: cradmission.NewDecoder(scheme), file: o.ReplayPatch}, RecoverPanic: &recoverPanic})
	metrics, err := metricsserver.NewServer(metricsserver.Options{BindAddress: o.MetricsAddr}, nil, nil)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return cw.Start(gctx) })
	g.Go(func() error { return srv.Start(gctx) })
	if metrics != nil {
		g.Go(func() error { return metrics.Start(gctx) })
	}
	return g.Wait()
}
