package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpuadmit/gpuadmit/pkg/agent/cdi"
)

// RunCDIDir is the CDI spec directory drivers write at run time, a tmpfs
// on a real node: gpuadmit's agent writes its specs there in both modes.
const RunCDIDir = "/var/run/cdi"

// Reboot does to the node what a reboot does: the kubelet stops, every
// container (the agent's too) is killed, containerd stops, and what lives
// on a tmpfs is lost: /run/containerd, containerd's state directory (on a
// node it is /run/containerd too; here it is under Dir), every mount
// (pod volumes under /var/lib/kubelet; the directories stay), the
// kubelet's cgroups, and gpuadmit's CDI specs in /var/run/cdi. What is on
// disk survives: /var/lib/kubelet with the kubelet's checkpoints and the
// DRA driver's (plugins/gpu.gpuadmit.io), containerd's root with its
// images, and the fake driver root, a mount of the test's own that a real
// node's driver would have again after a boot. Then containerd and the
// kubelet start again, and Reboot returns once the node is Ready; the
// pods come back as the kubelet restarts them.
//
// Of /var/run/cdi only the files of gpuadmit's CDI vendor go (SpecFiles):
// this machine's other specs are not the node's, and only one node, the
// one agent, runs here at a time.
func (n *Node) Reboot(ctx context.Context) error {
	n.kubelet.Stop()
	if err := n.killContainers(); err != nil {
		return fmt.Errorf("reboot: %w", err)
	}
	n.containerd.Stop()
	if shim, err := filepath.EvalSymlinks(filepath.Join(n.bin, "containerd-shim-runc-v2")); err == nil {
		killShims(shim)
	}
	if err := n.wipeRunState(); err != nil {
		return fmt.Errorf("reboot: %w", err)
	}
	if err := n.startContainerd(ctx); err != nil {
		return fmt.Errorf("reboot: %w", err)
	}
	since := time.Now()
	if err := n.startKubelet(); err != nil {
		return fmt.Errorf("reboot: %w", err)
	}
	return n.waitReady(ctx, since)
}

// wipeRunState removes what a reboot loses, as Reboot says.
func (n *Node) wipeRunState() error {
	if err := unmountUnder(KubeletDir); err != nil {
		return err
	}
	if err := removeUnmounted(ContainerdRunDir, filepath.Join(n.Dir, "containerd", "state")); err != nil {
		return err
	}
	if err := removeCgroups(); err != nil {
		return err
	}
	return removeSpecs()
}

// removeSpecs removes gpuadmit's CDI specs from RunCDIDir (SpecFiles), as
// a reboot does and as Stop does so that no run leaves claim specs behind
// on this machine.
func removeSpecs() error {
	specs, err := SpecFiles(RunCDIDir)
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range specs {
		errs = append(errs, os.Remove(f))
	}
	return errors.Join(errs...)
}

// SpecFiles are the CDI spec files of gpuadmit's vendor in dir: the device
// plugin's node spec and the DRA driver's claim specs, whose names begin
// with the kind gpuadmit.io/gpu as "gpuadmit.io-gpu".
func SpecFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	prefix := strings.ReplaceAll(cdi.Kind, "/", "-")
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) && strings.HasSuffix(e.Name(), ".json") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out, nil
}
