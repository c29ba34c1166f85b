package deploy_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestHelmWebhookURL: for clusters whose API server cannot reach pods
// through a Service (a private control plane, no kube-proxy), webhook.url
// points both webhooks at a URL, and webhook.hostNetwork runs the webhook
// pods in their node's network, so that URL can be the node's (a loopback
// address on a one-node cluster). Both are off by default: the defaults
// render the cert-manager overlay exactly (TestHelm).
func TestHelmWebhookURL(t *testing.T) {
	tl := findTools(t)
	b := newBundle(t)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, b.CACert, 0o600); err != nil {
		t.Fatal(err)
	}
	loopback := []string{"--set", "webhook.url=https://127.0.0.1:9443/", "--set", "webhook.hostNetwork=true", "--set", "replicas=1"}
	tests := map[string]struct {
		args     []string
		wantHost string // the certificate's extra IP or DNS name; "" in secret mode
		wantIP   bool
	}{
		"a loopback URL, certificates from a Secret": {
			args: append(slices.Clone(loopback), "--set", "certificates.mode=secret", "--set-file", "certificates.secret.caBundle="+caFile)},
		"a loopback URL, certificates from cert-manager": {args: loopback, wantHost: "127.0.0.1", wantIP: true},
		"a DNS name, certificates from cert-manager": {
			args: []string{"--set", "webhook.url=https://gpuadmit.example.com:9443"}, wantHost: "gpuadmit.example.com"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			objs := tl.template(t, tc.args...)
			base := "https://127.0.0.1:9443"
			if tc.wantHost != "" && !tc.wantIP {
				base = "https://" + tc.wantHost + ":9443"
			}
			m := get[*admissionregistrationv1.MutatingWebhookConfiguration](t, objs, "MutatingWebhookConfiguration", "", "gpuadmit")
			var got []string
			for _, w := range m.Webhooks {
				if w.ClientConfig.Service != nil || w.ClientConfig.URL == nil {
					t.Errorf("%s clientConfig %+v, want a URL and no Service", w.Name, w.ClientConfig)
					continue
				}
				got = append(got, *w.ClientConfig.URL)
			}
			if diff := cmp.Diff([]string{base + "/mutate-v1-pod", base + "/mutate-batch-v1-job"}, got); diff != "" {
				t.Errorf("webhook URLs (-want +got):\n%s", diff)
			}
			pod := deployment(t, objs)
			hostNet := slices.Contains(tc.args, "webhook.hostNetwork=true")
			if pod.HostNetwork != hostNet || hostNet && pod.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
				t.Errorf("hostNetwork %v, dnsPolicy %q; want hostNetwork %v (with ClusterFirstWithHostNet)", pod.HostNetwork, pod.DNSPolicy, hostNet)
			}
			if tc.wantHost == "" {
				checkSecretCA(b, false)(t, objs)
				return
			}
			c := get[*cmv1.Certificate](t, objs, "Certificate", namespace, "gpuadmit-webhook")
			names := append(slices.Clone(c.Spec.DNSNames), c.Spec.IPAddresses...)
			if !slices.Contains(names, tc.wantHost) || !slices.Contains(c.Spec.DNSNames, serviceName+"."+namespace+".svc") {
				t.Errorf("certificate names %v, want the Service's and %s", names, tc.wantHost)
			}
			if tc.wantIP != slices.Contains(c.Spec.IPAddresses, tc.wantHost) {
				t.Errorf("ipAddresses %v: %s belongs there only if it is an IP", c.Spec.IPAddresses, tc.wantHost)
			}
		})
	}
}

// TestHelmRefusesABadWebhookURL: the API server takes only https URLs, and
// the chart adds each webhook's path itself.
func TestHelmRefusesABadWebhookURL(t *testing.T) {
	tl := findTools(t)
	for _, url := range []string{"http://127.0.0.1:9443", "https://127.0.0.1:9443/mutate-v1-pod", "127.0.0.1:9443"} {
		_, err := tl.templateErr(t, "--set", "webhook.url="+url)
		if err == nil || !strings.Contains(err.Error(), "webhook/url") {
			t.Errorf("webhook.url=%s: got error %v, want one naming webhook/url", url, err)
		}
	}
}
