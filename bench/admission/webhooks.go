package admission

import (
	"context"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Configuration names, the values of Options.Configs.
const (
	None     = "none"
	Noop     = "noop"
	Patch    = "patch"  // the no-op server answering with one annotation added: the least a mutating webhook does
	Replay   = "replay" // the no-op server answering with gpuadmit's own patch for the template pod (--mix template only)
	Gpuadmit = "gpuadmit"
	OPA      = "opa"
)

// Configurations are the ones a run has unless Options.Configs says
// otherwise, in the order reports list them.
var Configurations = []string{None, Noop, Patch, Gpuadmit, OPA}

// AllConfigurations are the ones Options.Configs may name: Configurations
// and replay, which only pods of one template can have (every pod gets the
// same patch).
var AllConfigurations = []string{None, Noop, Patch, Replay, Gpuadmit, OPA}

// webhookNames are the webhooks' names, as the API server's metrics label them.
var webhookNames = map[string]string{
	Noop:     "pods.noop.bench.gpuadmit.io",
	Patch:    "pods.patch.bench.gpuadmit.io",
	Replay:   "pods.replay.bench.gpuadmit.io",
	Gpuadmit: "pods.mutate.gpuadmit.io",
	OPA:      "pods.opa.bench.gpuadmit.io",
}

// webhooks registers one configuration at a time. Every configuration is
// deploy/base's MutatingWebhookConfiguration for gpuadmit, as envtest
// installed it, with only its name and URL changed: the same rules,
// matchConditions, namespaceSelector, failurePolicy, timeoutSeconds,
// sideEffects and reinvocationPolicy, so only the server differs.
type webhooks struct {
	cs       kubernetes.Interface
	template *admissionregistrationv1.MutatingWebhookConfiguration
	urls     map[string]string // by configuration
	probe    func(ctx context.Context) error
	calls    func(ctx context.Context, name string) (float64, error)
}

// takeTemplate removes the installed configuration and keeps it as the template.
func (w *webhooks) takeTemplate(ctx context.Context, name string) error {
	mwc, err := w.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read installed webhook configuration %s: %w", name, err)
	}
	if len(mwc.Webhooks) == 0 || mwc.Webhooks[0].Name != webhookNames[Gpuadmit] {
		return fmt.Errorf("webhook configuration %s: want its first webhook to be %s", name, webhookNames[Gpuadmit])
	}
	w.template = mwc
	if err := w.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	return w.waitCalled(ctx, Gpuadmit, false)
}

func (w *webhooks) object(config string) *admissionregistrationv1.MutatingWebhookConfiguration {
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	mwc.Name = "bench-" + config
	mwc.Labels = map[string]string{"app.kubernetes.io/part-of": "gpuadmit-bench"}
	wh := *w.template.Webhooks[0].DeepCopy()
	wh.Name = webhookNames[config]
	url := w.urls[config]
	wh.ClientConfig.URL, wh.ClientConfig.Service = &url, nil
	mwc.Webhooks = []admissionregistrationv1.MutatingWebhook{wh}
	return mwc
}

// register installs the configuration's webhook and waits until the API server calls it.
func (w *webhooks) register(ctx context.Context, config string) error {
	if config == None {
		return nil
	}
	if _, err := w.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, w.object(config), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("register %s: %w", config, err)
	}
	return w.waitCalled(ctx, config, true)
}

// unregister removes it and waits until the API server stops calling it.
func (w *webhooks) unregister(ctx context.Context, config string) error {
	if config == None {
		return nil
	}
	err := w.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, "bench-"+config, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("unregister %s: %w", config, err)
	}
	return w.waitCalled(ctx, config, false)
}

// waitCalled dry-runs a GPU pod until the API server's call count for the
// configuration's webhook moves (want) or stays (!want): its webhook
// configuration informer has caught up.
func (w *webhooks) waitCalled(ctx context.Context, config string, want bool) error {
	name := webhookNames[config]
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		before, err := w.calls(ctx, name)
		if err != nil {
			return err
		}
		if err := w.probe(ctx); err != nil && want {
			return fmt.Errorf("probe %s: %w", config, err)
		}
		after, err := w.calls(ctx, name)
		if err != nil {
			return err
		}
		if (after > before) == want {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("webhook %s: the API server did not %s calling it within 30s", name, map[bool]string{true: "start", false: "stop"}[want])
}
