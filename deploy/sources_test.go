package deploy_test

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/certs"
)

const injectCA = "cert-manager.io/inject-ca-from"

// caSettings are where the API server finds the webhooks' CA.
type caSettings struct {
	annotations []map[string]string
	bundles     [][]byte
}

func caOf(t *testing.T, objs objects) caSettings {
	t.Helper()
	m := get[*admissionregistrationv1.MutatingWebhookConfiguration](t, objs, "MutatingWebhookConfiguration", "", "gpuadmit")
	s := caSettings{annotations: []map[string]string{m.Annotations}}
	for _, w := range m.Webhooks {
		s.bundles = append(s.bundles, w.ClientConfig.CABundle)
	}
	return s
}

// tlsVolume is the Secret the webhook serves from.
func tlsVolume(t *testing.T, objs objects) string {
	t.Helper()
	pod := deployment(t, objs)
	return mount(t, pod, container(t, pod.Containers, "webhook"), "/tls").Secret.SecretName
}

// checkNoCertificates: the base leaves certificates to the overlays.
func checkNoCertificates(t *testing.T, objs objects) {
	t.Helper()
	for k := range objs {
		if k.Kind == "Certificate" || k.Kind == "Issuer" || k.Kind == "Secret" {
			t.Errorf("the base renders %s; certificates belong to an overlay", k)
		}
	}
	ca := caOf(t, objs)
	for i, b := range ca.bundles {
		if len(b) > 0 {
			t.Errorf("the base sets a caBundle on webhook %d", i)
		}
	}
	for i, a := range ca.annotations {
		if a[injectCA] != "" {
			t.Errorf("the base asks cert-manager to inject a CA into webhook configuration %d", i)
		}
	}
	if got := tlsVolume(t, objs); got != tlsSecretName {
		t.Errorf("webhook serves from Secret %q, want %q", got, tlsSecretName)
	}
}

// checkCertManager: a serving Certificate for the Service's DNS names, into
// the Secret the webhook mounts, issued by a CA of gpuadmit's own, and that
// CA injected into both webhook configurations.
func checkCertManager(t *testing.T, objs objects) {
	t.Helper()
	serving := get[*cmv1.Certificate](t, objs, "Certificate", namespace, "gpuadmit-webhook")
	s := serving.Spec
	for _, name := range []string{serviceName + "." + namespace + ".svc", serviceName + "." + namespace + ".svc.cluster.local"} {
		if !slices.Contains(s.DNSNames, name) {
			t.Errorf("serving Certificate dnsNames %v lack %s", s.DNSNames, name)
		}
	}
	if s.SecretName != tlsSecretName || tlsVolume(t, objs) != s.SecretName {
		t.Errorf("serving Certificate writes Secret %q, webhook mounts %q, want both %q", s.SecretName, tlsVolume(t, objs), tlsSecretName)
	}
	if k := s.PrivateKey; k == nil || k.Algorithm != cmv1.ECDSAKeyAlgorithm || k.Size != 256 || k.RotationPolicy != cmv1.RotationPolicyAlways {
		t.Errorf("serving Certificate privateKey = %+v, want ECDSA 256, rotationPolicy Always", k)
	}
	if s.Duration == nil || s.Duration.Duration != 2160*time.Hour || s.RenewBefore == nil || s.RenewBefore.Duration != 360*time.Hour {
		t.Errorf("serving Certificate duration %v, renewBefore %v, want 2160h and 360h", s.Duration, s.RenewBefore)
	}
	caIssuer := issuer(t, objs, s.IssuerRef.Kind, s.IssuerRef.Name)
	if caIssuer.Spec.CA == nil {
		t.Fatalf("serving Certificate's Issuer %s is not a CA issuer: %+v", caIssuer.Name, caIssuer.Spec)
	}
	var ca *cmv1.Certificate
	for _, o := range objs {
		if c, ok := o.(*cmv1.Certificate); ok && c.Spec.SecretName == caIssuer.Spec.CA.SecretName {
			ca = c
		}
	}
	if ca == nil || !ca.Spec.IsCA {
		t.Fatalf("no CA Certificate writes Secret %s for Issuer %s", caIssuer.Spec.CA.SecretName, caIssuer.Name)
	}
	if root := issuer(t, objs, ca.Spec.IssuerRef.Kind, ca.Spec.IssuerRef.Name); root.Spec.SelfSigned == nil {
		t.Errorf("CA Certificate %s is issued by %s, want a selfSigned Issuer", ca.Name, root.Name)
	}
	want := namespace + "/" + serving.Name
	c := caOf(t, objs)
	for i, a := range c.annotations {
		if a[injectCA] != want {
			t.Errorf("webhook configuration %d: %s = %q, want %q", i, injectCA, a[injectCA], want)
		}
	}
	for i, b := range c.bundles {
		if len(b) > 0 {
			t.Errorf("webhook %d has a caBundle besides cert-manager's injection", i)
		}
	}
}

func issuer(t *testing.T, objs objects, kind, name string) *cmv1.Issuer {
	t.Helper()
	if kind != "" && kind != cmv1.IssuerKind {
		t.Fatalf("issuerRef kind %q: want a namespaced Issuer", kind)
	}
	return get[*cmv1.Issuer](t, objs, cmv1.IssuerKind, namespace, name)
}

// checkSecretCA: both webhooks trust exactly the generated CA, and the
// serving Secret (when rendered) holds a certificate it verifies for the Service.
func checkSecretCA(b *certs.Bundle, rendersSecret bool) func(*testing.T, objects) {
	return func(t *testing.T, objs objects) {
		t.Helper()
		c := caOf(t, objs)
		for i, got := range c.bundles {
			if string(got) != string(b.CACert) {
				t.Errorf("webhook %d caBundle is not the generated CA:\n%s", i, got)
			}
		}
		for i, a := range c.annotations {
			if a[injectCA] != "" {
				t.Errorf("webhook configuration %d asks cert-manager for its CA", i)
			}
		}
		for k := range objs {
			if k.Kind == "Certificate" || k.Kind == "Issuer" {
				t.Errorf("%s rendered without cert-manager", k)
			}
		}
		name := tlsVolume(t, objs)
		if !rendersSecret {
			return
		}
		s := get[*corev1.Secret](t, objs, "Secret", namespace, name)
		want := map[string]string{"ca.crt": string(b.CACert), "tls.crt": string(b.Cert), "tls.key": string(b.Key)}
		got := map[string]string{}
		for k, v := range s.Data {
			got[k] = string(v)
		}
		if s.Type != corev1.SecretTypeTLS || !cmp.Equal(got, want) {
			t.Errorf("Secret %s is %s with keys %v, want kubernetes.io/tls with the generated ca.crt, tls.crt, tls.key", name, s.Type, keys(got))
		}
		verify(t, c.bundles[0], s.Data[corev1.TLSCertKey], serviceName+"."+namespace+".svc")
	}
}

// verify checks that the serving certificate chains to caBundle for dnsName,
// as the API server will when it calls the webhook.
func verify(t *testing.T, caBundle, cert []byte, dnsName string) {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caBundle) {
		t.Fatal("caBundle holds no PEM certificate")
	}
	blk, _ := pem.Decode(cert)
	if blk == nil {
		t.Fatal("tls.crt is not PEM")
	}
	leaf, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: dnsName}); err != nil {
		t.Errorf("serving certificate does not verify against caBundle for %s: %v", dnsName, err)
	}
}

// checkConfigMapPolicies: the webhook loads /policies from ConfigMap
// gpuadmit-policies, which holds exactly want (the repository's default
// policy set, every file of it). Nil want means the chart only mounts a
// ConfigMap made elsewhere.
func checkConfigMapPolicies(want map[string]string) func(*testing.T, objects) {
	return func(t *testing.T, objs objects) {
		t.Helper()
		pod := deployment(t, objs)
		v := mount(t, pod, container(t, pod.Containers, "webhook"), "/policies")
		if v.ConfigMap == nil || v.ConfigMap.Name != "gpuadmit-policies" {
			t.Fatalf("/policies is %+v, want ConfigMap gpuadmit-policies", v)
		}
		k := key{"ConfigMap", namespace, "gpuadmit-policies"}
		if want == nil {
			if _, ok := objs[k]; ok {
				t.Errorf("%s rendered though no policy files were given", k)
			}
			return
		}
		cm := get[*corev1.ConfigMap](t, objs, k.Kind, k.Namespace, k.Name)
		if diff := cmp.Diff(want, cm.Data); diff != "" {
			t.Errorf("ConfigMap gpuadmit-policies differs from policies/ (-policies/ +ConfigMap); list every policy file "+
				"in policies/kustomization.yaml's configMapGenerator:\n%s", diff)
		}
	}
}

// checkGitSync: a git-sync v4 native sidecar checks out into an emptyDir the
// webhook reads at /git, and --policies points into its --link.
func checkGitSync(t *testing.T, objs objects) {
	t.Helper()
	pod := deployment(t, objs)
	gs := container(t, pod.InitContainers, "git-sync")
	if gs.RestartPolicy == nil || *gs.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("git-sync restartPolicy = %s, want Always (a native sidecar)", show(gs.RestartPolicy))
	}
	if !strings.HasPrefix(gs.Image, "registry.k8s.io/git-sync/git-sync:v4.") {
		t.Errorf("git-sync image = %s, want git-sync v4", gs.Image)
	}
	flags := map[string]string{}
	for _, a := range gs.Args {
		k, v, _ := strings.Cut(a, "=")
		flags[k] = v
	}
	if flags["--repo"] == "" || flags["--root"] != "/git" || flags["--link"] != "current" || flags["--period"] != "30s" {
		t.Errorf("git-sync args = %q, want --repo, --root=/git, --link=current, --period=30s", gs.Args)
	}
	webhook := container(t, pod.Containers, "webhook")
	shared := mount(t, pod, gs, "/git")
	if shared.EmptyDir == nil || mount(t, pod, webhook, "/git").Name != shared.Name {
		t.Errorf("git-sync and the webhook do not share an emptyDir at /git")
	}
	if tmp := mount(t, pod, gs, "/tmp"); tmp.EmptyDir == nil || tmp.Name == mount(t, pod, webhook, "/tmp").Name {
		t.Errorf("git-sync's /tmp is %+v, want an emptyDir of its own", tmp)
	}
	if !slices.Contains(webhook.Args, "--policies="+flags["--root"]+"/"+flags["--link"]+"/policies") {
		t.Errorf("webhook args %q do not load policies/ from git-sync's link", webhook.Args)
	}
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
