package deploy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// notes renders the chart's NOTES.txt, which `helm template` leaves out:
// a copy of the chart wraps it in a ConfigMap.
func (tl tools) notes(t *testing.T, args ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "gpuadmit")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("helm", "gpuadmit"))); err != nil {
		t.Fatal(err)
	}
	tmpl := filepath.Join(dir, "templates")
	notes, err := os.ReadFile(filepath.Join(tmpl, "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"NOTES.txt":       "",
		"_notes.tpl":      `{{- define "test.notes" -}}` + string(notes) + `{{- end }}`,
		"notes-test.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\n  namespace: test\ndata:\n  notes: {{ include \"test.notes\" . | quote }}\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(tmpl, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := tl.Template(dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return get[*corev1.ConfigMap](t, decode(t, out), "ConfigMap", "test", "notes").Data["notes"]
}

// TestHelmNotes: what `helm install` prints names the Secrets the chart
// does not create and the pods wait for, and says what an outage does to
// GPU pods: a bare one is refused, not kept waiting.
func TestHelmNotes(t *testing.T) {
	tl := findTools(t)
	tests := map[string]struct {
		args []string
		want []string
		not  []string
	}{
		"cert-manager": {
			want: []string{"kubectl -n gpuadmit-system get certificate gpuadmit-webhook", "gpuadmit-record-key --from-literal=current=",
				"the Service gpuadmit-webhook.gpuadmit-system.svc", "a bare pod is refused at once", "InternalError"},
			not: []string{"GPU wait for the webhook", "secret tls"},
		},
		"secret mode": {
			args: []string{"--set", "certificates.mode=secret", "--set", "certificates.secret.caBundle=" + b64(newBundle(t).CACert)},
			want: []string{"secret gpuadmit-webhook-tls not found", "kubectl -n gpuadmit-system create secret tls gpuadmit-webhook-tls",
				"gpuadmit-record-key --from-literal=current=", "a bare pod is refused at once"},
			not: []string{"cert-manager"},
		},
		"secret mode with the certificate as values": {
			args: []string{"--set", "certificates.mode=secret", "--set", "certificates.secret.caBundle=" + b64(newBundle(t).CACert),
				"--set", "certificates.secret.tlsCrt=x", "--set", "certificates.secret.tlsKey=y"},
			want: []string{"rendered from\nthe values certificates.secret.tlsCrt and tlsKey"},
			not:  []string{"not found"},
		},
		"a loopback URL on the host network": {
			args: []string{"--set", "webhook.url=https://127.0.0.1:9443", "--set", "webhook.hostNetwork=true"},
			want: []string{"at https://127.0.0.1:9443 (host network)"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := tl.notes(t, tc.args...)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("NOTES do not say %q:\n%s", w, got)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("NOTES say %q:\n%s", n, got)
				}
			}
		})
	}
}
