// Package certs makes serving certificates for development: a CA and a
// certificate for the webhook Service, signed by it, with crypto/x509 (no
// openssl). Clusters use cert-manager instead (deploy/overlays/cert-manager);
// this is for a dev cluster, local runs and tests.
package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Options says what the serving certificate is for. The zero value is not
// useful: set Service and Namespace, or DNSNames/IPs.
type Options struct {
	// Service and Namespace add the Service's DNS names (svc, svc.ns, svc.ns.svc, svc.ns.svc.cluster.local).
	Service, Namespace string
	// DNSNames and IPs are further subject alternative names (localhost, 127.0.0.1 for local runs).
	DNSNames []string
	IPs      []net.IP
	// Validity is how long both certificates are valid; zero means one year.
	Validity time.Duration
	// Now is the start of validity; zero means time.Now().
	Now time.Time
}

// Bundle is a CA and a serving certificate signed by it, all PEM.
type Bundle struct {
	CACert, CAKey, Cert, Key []byte
}

// Generate makes a new CA and a serving certificate.
func Generate(opts Options) (*Bundle, error) {
	ca, caKey, caPEM, caKeyPEM, err := newCA(opts)
	if err != nil {
		return nil, err
	}
	cert, key, err := Sign(ca, caKey, opts)
	if err != nil {
		return nil, err
	}
	return &Bundle{CACert: caPEM, CAKey: caKeyPEM, Cert: cert, Key: key}, nil
}

func (o Options) window() (time.Time, time.Time) {
	now, validity := o.Now, o.Validity
	if now.IsZero() {
		now = time.Now()
	}
	if validity <= 0 {
		validity = 365 * 24 * time.Hour
	}
	return now.Add(-time.Minute), now.Add(validity)
}

func newCA(opts Options) (*x509.Certificate, *ecdsa.PrivateKey, []byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("generate CA key: %w", err)
	}
	from, to := opts.window()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "gpuadmit development CA"},
		NotBefore:             from,
		NotAfter:              to,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("create CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	keyPEM, err := encodeKey(key)
	return ca, key, pemBlock("CERTIFICATE", der), keyPEM, err
}

// Sign makes a serving certificate for opts signed by the CA, e.g. to rotate
// the serving certificate under the same CA.
func Sign(ca *x509.Certificate, caKey *ecdsa.PrivateKey, opts Options) (cert, key []byte, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate serving key: %w", err)
	}
	names := opts.dnsNames()
	if len(names) == 0 && len(opts.IPs) == 0 {
		return nil, nil, fmt.Errorf("a serving certificate needs a Service, DNS names or IPs")
	}
	from, to := opts.window()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: firstOr(names, "gpuadmit-webhook")},
		DNSNames:     names,
		IPAddresses:  opts.IPs,
		NotBefore:    from,
		NotAfter:     to,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("create serving certificate: %w", err)
	}
	keyPEM, err := encodeKey(k)
	return pemBlock("CERTIFICATE", der), keyPEM, err
}

func (o Options) dnsNames() []string {
	var names []string
	if o.Service != "" && o.Namespace != "" {
		s, ns := o.Service, o.Namespace
		names = append(names, s, s+"."+ns, s+"."+ns+".svc", s+"."+ns+".svc.cluster.local")
	}
	return append(names, o.DNSNames...)
}

func firstOr(s []string, def string) string {
	if len(s) > 0 {
		return s[0]
	}
	return def
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

func encodeKey(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return pemBlock("PRIVATE KEY", der), nil
}

func pemBlock(typ string, der []byte) []byte {
	var b bytes.Buffer
	_ = pem.Encode(&b, &pem.Block{Type: typ, Bytes: der})
	return b.Bytes()
}

// ParseCA reads back a bundle's CA certificate and key, to sign more certificates.
func (b *Bundle) ParseCA() (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cb, _ := pem.Decode(b.CACert)
	kb, _ := pem.Decode(b.CAKey)
	if cb == nil || kb == nil {
		return nil, nil, fmt.Errorf("CA certificate or key is not PEM")
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("parse CA key: %w", err)
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, nil, fmt.Errorf("CA key is not ECDSA")
	}
	return ca, ek, nil
}

// WriteDir writes ca.crt, ca.key, tls.crt and tls.key into dir, each file
// replaced atomically (written aside, then renamed) so a watcher never reads
// half a file, and a development record key (RecordKeyFile) unless dir has one.
func (b *Bundle) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, data := range map[string][]byte{"ca.crt": b.CACert, "ca.key": b.CAKey, "tls.crt": b.Cert, "tls.key": b.Key} {
		if err := WriteFileAtomic(filepath.Join(dir, name), data); err != nil {
			return err
		}
	}
	return writeRecordKey(filepath.Join(dir, RecordKeyFile))
}

// RecordKeyFile is the development key that seals the webhook's record
// (the dev overlay's Secret gpuadmit-record-key). It is kept when the
// certificates are made again, so pods sealed before still verify.
const RecordKeyFile = "record-key"

// writeRecordKey writes 32 random bytes, hex-encoded, unless path exists.
func writeRecordKey(path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("record key: %w", err)
	}
	return WriteFileAtomic(path, []byte(hex.EncodeToString(key)))
}

// WriteFileAtomic replaces path with data by writing a temporary file beside it and renaming it.
func WriteFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
