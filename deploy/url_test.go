package deploy_test

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/certs"
	"github.com/gpuadmit/gpuadmit/deploy"
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
			checkNamespacePodSecurity(t, objs, hostNet)
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

// TestDevLoopbackOverlay: the dev overlay for a one-node cluster without
// kube-proxy calls the webhook at a loopback URL, on the host network, with
// the dev overlay's CA; a certificate made with --ip 127.0.0.1 verifies
// there.
func TestDevLoopbackOverlay(t *testing.T) {
	tl := findTools(t)
	b, err := certs.Generate(certs.Options{Service: serviceName, Namespace: namespace, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	if _, err := deploy.DevOverlay(".", tmp, b); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "overlays", "dev-loopback")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("overlays", "dev-loopback"))); err != nil {
		t.Fatal(err)
	}
	objs := tl.build(t, dir)
	m := get[*admissionregistrationv1.MutatingWebhookConfiguration](t, objs, "MutatingWebhookConfiguration", "", "gpuadmit")
	var got []string
	for _, w := range m.Webhooks {
		if w.ClientConfig.Service != nil || w.ClientConfig.URL == nil || string(w.ClientConfig.CABundle) != string(b.CACert) {
			t.Errorf("%s clientConfig %+v, want a URL, no Service, and the dev CA", w.Name, w.ClientConfig)
			continue
		}
		got = append(got, *w.ClientConfig.URL)
	}
	if diff := cmp.Diff([]string{"https://127.0.0.1:9443/mutate-v1-pod", "https://127.0.0.1:9443/mutate-batch-v1-job"}, got); diff != "" {
		t.Errorf("webhook URLs (-want +got):\n%s", diff)
	}
	d := get[*appsv1.Deployment](t, objs, "Deployment", namespace, "gpuadmit-webhook")
	if pod := d.Spec.Template.Spec; !pod.HostNetwork || pod.DNSPolicy != corev1.DNSClusterFirstWithHostNet || d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("hostNetwork %v, dnsPolicy %q, replicas %v; want the host network, ClusterFirstWithHostNet, one replica", pod.HostNetwork, pod.DNSPolicy, show(d.Spec.Replicas))
	}
	checkNamespacePodSecurity(t, objs, true)
	s := get[*corev1.Secret](t, objs, "Secret", namespace, tlsSecretName)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(m.Webhooks[0].ClientConfig.CABundle)
	block, _ := pem.Decode(s.Data[corev1.TLSCertKey])
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1"}); err != nil {
		t.Errorf("the serving certificate does not verify for 127.0.0.1: %v", err)
	}
}

// checkNamespacePodSecurity checks that gpuadmit's namespace admits its webhook
// pods: Pod Security's baseline and restricted profiles forbid the host
// network, so a webhook on it needs the privileged profile (the install on
// the real node found every webhook pod refused, test/e2e/node's Install
// tests); without it, restricted.
func checkNamespacePodSecurity(t *testing.T, objs objects, hostNetwork bool) {
	t.Helper()
	ns := get[*corev1.Namespace](t, objs, "Namespace", "", namespace)
	want := "restricted"
	if hostNetwork {
		want = "privileged"
	}
	if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != want {
		t.Errorf("namespace %s enforces Pod Security %q; want %q (hostNetwork %v)", namespace, got, want, hostNetwork)
	}
}
