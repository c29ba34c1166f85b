package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/gpuadmit/gpuadmit/certs"
)

// Tools are the renderers hack/tools.sh installs: kustomize and helm.
type Tools struct{ Kustomize, Helm string }

// FindTools looks for kustomize and helm in dir and names the missing ones.
func FindTools(dir string) (Tools, []string) {
	t := Tools{Kustomize: filepath.Join(dir, "kustomize"), Helm: filepath.Join(dir, "helm")}
	var missing []string
	for _, p := range []string{t.Kustomize, t.Helm} {
		if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 {
			missing = append(missing, filepath.Base(p))
		}
	}
	return t, missing
}

// Build renders a kustomization directory.
func (t Tools) Build(dir string) ([]byte, error) {
	return run(exec.Command(t.Kustomize, "build", dir))
}

// Template renders the chart in chartDir with extra helm arguments. Helm's
// own directories point into a temporary directory so no user setting leaks in.
func (t Tools) Template(chartDir string, args ...string) ([]byte, error) {
	home, err := os.MkdirTemp("", "gpuadmit-helm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(home)
	cmd := exec.Command(t.Helm, append([]string{"template", "gpuadmit", chartDir, "--kube-version", "1.33.0"}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	return run(cmd)
}

func run(cmd *exec.Cmd) ([]byte, error) {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", filepath.Base(cmd.Path), strings.Join(cmd.Args[1:], " "), err, stderr.String())
	}
	return out, nil
}

// DevOverlay copies base and the dev overlay from deployDir into tmp with the
// bundle's certificates where `gpuadmit certs` would leave them, and returns
// the overlay directory to build.
func DevOverlay(deployDir, tmp string, b *certs.Bundle) (string, error) {
	for _, dir := range []string{"base", filepath.Join("overlays", "dev")} {
		if err := os.CopyFS(filepath.Join(tmp, dir), os.DirFS(filepath.Join(deployDir, dir))); err != nil {
			return "", err
		}
	}
	dir := filepath.Join(tmp, "overlays", "dev")
	return dir, b.WriteDir(filepath.Join(dir, "certs"))
}
