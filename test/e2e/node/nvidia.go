package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NVIDIA's container runtime (nvidia-container-runtime, from the container
// toolkit's module, built by hack/node-binaries.sh) is registered in the
// node's containerd, when its binary is in BinDir, as two runtime handlers
// with a RuntimeClass each: the same runtime in cdi mode under the two
// settings of accept-nvidia-visible-devices-envvar-when-unprivileged. A pod
// picks one with spec.runtimeClassName; pods naming none run under plain
// runc as before.
const (
	// NVIDIARuntimeClass runs containers under nvidia-container-runtime with
	// accept-nvidia-visible-devices-envvar-when-unprivileged = false, the
	// setting docs/node.md asks of a node: an unprivileged container's
	// NVIDIA_VISIBLE_DEVICES selects no device.
	NVIDIARuntimeClass = "nvidia"
	// NVIDIAEnvvarRuntimeClass runs containers under nvidia-container-runtime
	// with accept-nvidia-visible-devices-envvar-when-unprivileged = true,
	// the toolkit's default: any container's NVIDIA_VISIBLE_DEVICES selects
	// the CDI devices nvidia.com/gpu=<each value>.
	NVIDIAEnvvarRuntimeClass = "nvidia-envvar"
)

// nvidiaRuntimeBinary is the runtime's file name in BinDir.
const nvidiaRuntimeBinary = "nvidia-container-runtime"

// NVIDIARuntime is one of the node's handlers running nvidia-container-runtime.
type NVIDIARuntime struct {
	// RuntimeClass is the RuntimeClass (and containerd handler) a pod names
	// in spec.runtimeClassName to run under it.
	RuntimeClass string
	// AcceptEnvvar is its accept-nvidia-visible-devices-envvar-when-unprivileged.
	AcceptEnvvar bool
	// Config is the toolkit's config.toml the handler runs with.
	Config string
	// Log is the runtime's debug log (log-level debug): what it read from
	// the container's spec, which CDI devices it injected, and the warning
	// it writes when it ignores an unprivileged container's variable.
	Log string
}

// NVIDIARuntime returns the handler running nvidia-container-runtime with
// the given accept-nvidia-visible-devices-envvar-when-unprivileged; its
// RuntimeClass exists from Start on. It fails when BinDir held no
// nvidia-container-runtime when the node started.
func (n *Node) NVIDIARuntime(acceptEnvvar bool) (NVIDIARuntime, error) {
	for _, r := range n.nvidia {
		if r.AcceptEnvvar == acceptEnvvar {
			return r, nil
		}
	}
	return NVIDIARuntime{}, fmt.Errorf("%w: no %s in %s when the node started; build it with hack/node-binaries.sh",
		ErrUnavailable, nvidiaRuntimeBinary, n.bin)
}

// nvidiaRuntimes are the handlers Start registers where the runtime's binary
// is in bin; none where it is not.
func nvidiaRuntimes(dir, logDir, bin string) []NVIDIARuntime {
	if _, err := os.Stat(filepath.Join(bin, nvidiaRuntimeBinary)); err != nil {
		return nil
	}
	var out []NVIDIARuntime
	for _, accept := range []bool{false, true} {
		class := NVIDIARuntimeClass
		if accept {
			class = NVIDIAEnvvarRuntimeClass
		}
		out = append(out, NVIDIARuntime{
			RuntimeClass: class,
			AcceptEnvvar: accept,
			Config:       filepath.Join(dir, "nvidia-runtime", class, "config.toml"),
			Log:          filepath.Join(logDir, "nvidia-container-runtime-"+class+".log"),
		})
	}
	return out
}

// wrapper is the executable containerd's runc shim runs as the handler's
// runtime binary (its BinaryName option). The shim has no option for the
// runtime's environment, and the toolkit reads its configuration from
// $NVIDIA_CTK_CONFIG_FILE_PATH, else $XDG_CONFIG_HOME/nvidia-container-runtime/config.toml,
// else /etc/nvidia-container-runtime/config.toml (api/config/v1,
// GetConfigFilePath): a script that sets the first and execs the runtime
// keeps this machine's /etc alone and lets two handlers differ.
func (r NVIDIARuntime) wrapper() string { return filepath.Join(filepath.Dir(r.Config), "runtime") }

// config is the toolkit's configuration for r: cdi mode (legacy mode would
// exec nvidia-container-cli, libnvidia-container, which is C and not built
// here), runc from bin as the low-level runtime, the node's CDI spec
// directory read before /etc/cdi and /var/run/cdi, and debug logging.
// Unset keys keep the toolkit's defaults: default-kind nvidia.com/gpu, so
// NVIDIA_VISIBLE_DEVICES=0 asks for the CDI device nvidia.com/gpu=0, and the
// annotation prefix cdi.k8s.io/.
func (r NVIDIARuntime) config(bin, specDir string) string {
	q := strconv.Quote
	return strings.Join([]string{
		"accept-nvidia-visible-devices-envvar-when-unprivileged = " + strconv.FormatBool(r.AcceptEnvvar),
		"",
		"[nvidia-container-runtime]",
		"debug = " + q(r.Log),
		`log-level = "debug"`,
		`mode = "cdi"`,
		"runtimes = [" + q(filepath.Join(bin, "runc")) + "]",
		"",
		"[nvidia-container-runtime.modes.cdi]",
		`default-kind = "nvidia.com/gpu"`,
		"spec-dirs = [" + q(specDir) + `, "/etc/cdi", "/var/run/cdi"]`,
		"",
	}, "\n")
}

func (r NVIDIARuntime) write(bin, specDir string) error {
	if err := os.MkdirAll(filepath.Dir(r.Config), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(r.Config, []byte(r.config(bin, specDir)), 0o644); err != nil {
		return err
	}
	script := "#!/bin/sh\nNVIDIA_CTK_CONFIG_FILE_PATH=" + shellQuote(r.Config) + " exec " +
		shellQuote(filepath.Join(bin, nvidiaRuntimeBinary)) + ` "$@"` + "\n"
	return os.WriteFile(r.wrapper(), []byte(script), 0o755)
}

// shellQuote quotes s for sh in single quotes.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// writeNVIDIARuntimes writes each handler's configuration and wrapper, and
// makes the node's CDI spec directory.
func (n *Node) writeNVIDIARuntimes() error {
	if err := os.MkdirAll(n.CDISpecDir, 0o755); err != nil {
		return err
	}
	for _, r := range n.nvidia {
		if err := r.write(n.bin, n.CDISpecDir); err != nil {
			return fmt.Errorf("nvidia runtime %s: %w", r.RuntimeClass, err)
		}
	}
	return nil
}

// createRuntimeClasses creates a RuntimeClass for each NVIDIA handler.
func (n *Node) createRuntimeClasses(ctx context.Context) error {
	var errs []error
	for _, r := range n.nvidia {
		rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: r.RuntimeClass}, Handler: r.RuntimeClass}
		_, err := n.Client.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("RuntimeClass %s: %w", r.RuntimeClass, err))
		}
	}
	return errors.Join(errs...)
}
