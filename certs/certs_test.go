package certs

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestServingCertificateVerifiesAgainstItsCA(t *testing.T) {
	b, err := Generate(Options{Service: "gpuadmit-webhook", Namespace: "gpuadmit-system", IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(b.Cert, b.Key)
	if err != nil {
		t.Fatalf("serving pair: %v", err)
	}
	leaf, _ := x509.ParseCertificate(pair.Certificate[0])
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b.CACert) {
		t.Fatal("CA is not PEM")
	}
	for _, name := range []string{"gpuadmit-webhook.gpuadmit-system.svc", "gpuadmit-webhook.gpuadmit-system.svc.cluster.local", "127.0.0.1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool}); err != nil {
			t.Errorf("verify for %s: %v", name, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "other.svc", Roots: pool}); err == nil {
		t.Error("the certificate verifies for a name it was not made for")
	}
}

func TestSignRotatesUnderTheSameCA(t *testing.T) {
	b, err := Generate(Options{DNSNames: []string{"localhost"}, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ca, key, err := b.ParseCA()
	if err != nil {
		t.Fatal(err)
	}
	cert, _, err := Sign(ca, key, Options{DNSNames: []string{"localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(b.Cert, b.Key)
	if err != nil {
		t.Fatal(err)
	}
	if string(cert) == string(b.Cert) {
		t.Error("Sign returned the same certificate")
	}
	first, _ := x509.ParseCertificate(pair.Certificate[0])
	if first.NotAfter.Sub(first.NotBefore) > 2*time.Hour {
		t.Errorf("validity %v, want about the hour asked for", first.NotAfter.Sub(first.NotBefore))
	}
	if _, _, err := Sign(ca, key, Options{}); err == nil {
		t.Error("Sign without any name succeeded")
	}
}

func TestWriteDir(t *testing.T) {
	b, _ := Generate(Options{DNSNames: []string{"localhost"}})
	dir := t.TempDir()
	if err := b.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := tls.LoadX509KeyPair(dir+"/tls.crt", dir+"/tls.key"); err != nil {
		t.Errorf("written pair does not load: %v", err)
	}
}

// TestWriteDirKeepsTheRecordKey: the development record key is random, and
// making the certificates again keeps it, so pods sealed before still verify.
func TestWriteDirKeepsTheRecordKey(t *testing.T) {
	dir := t.TempDir()
	b, _ := Generate(Options{DNSNames: []string{"localhost"}})
	if err := b.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(filepath.Join(dir, RecordKeyFile))
	if err != nil || len(first) != 64 {
		t.Fatalf("record key %q, %v; want 64 hex digits", first, err)
	}
	if err := b.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, RecordKeyFile)); string(again) != string(first) {
		t.Errorf("record key changed from %q to %q on a second write", first, again)
	}
	other := t.TempDir()
	if err := b.WriteDir(other); err != nil {
		t.Fatal(err)
	}
	if fresh, _ := os.ReadFile(filepath.Join(other, RecordKeyFile)); string(fresh) == string(first) {
		t.Error("two directories got the same record key")
	}
}
