package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// containerdConfig is containerd v2.4's configuration (version 4) for the
// node: its root and state under the node's directory, no host
// configuration imported, runc (from the binary directory) as the only
// runtime, CNI's loopback plugin alone, and NRI off so nothing appears in
// /var/run/nri. The CRI's runtime section restricts oom_score_adj, because
// these machines lack CAP_SYS_RESOURCE and every sandbox fails otherwise.
// CDI is always on in v2; its spec directories are the defaults
// (/etc/cdi, /var/run/cdi), where drivers write them, after the node's own
// (specDir), which stands in for /etc/cdi so that a test's node-wide spec
// leaves this machine's alone. Each NVIDIA runtime is one more runc handler
// whose runc binary is the runtime's wrapper.
func containerdConfig(dir, bin, specDir string, nvidia []NVIDIARuntime) string {
	q := func(s string) string { return "'" + s + "'" }
	lines := []string{
		`version = 4`,
		`root = ` + q(filepath.Join(dir, "containerd", "root")),
		`state = ` + q(filepath.Join(dir, "containerd", "state")),
		`imports = []`,
		``,
		`[plugins]`,
		`  [plugins.'io.containerd.server.v1.grpc']`,
		`    address = ` + q(ContainerdSocket),
		`  [plugins.'io.containerd.server.v1.ttrpc']`,
		`    address = ` + q(ContainerdSocket+".ttrpc"),
		`  [plugins.'io.containerd.cri.v1.images']`,
		`    snapshotter = 'overlayfs'`,
		`    [plugins.'io.containerd.cri.v1.images'.pinned_images]`,
		`      sandbox = ` + q(PauseImage),
		`  [plugins.'io.containerd.cri.v1.runtime']`,
		`    restrict_oom_score_adj = true`,
		`    cdi_spec_dirs = [` + q(specDir) + `, '/etc/cdi', '/var/run/cdi']`,
		`    [plugins.'io.containerd.cri.v1.runtime'.containerd]`,
		`      default_runtime_name = 'runc'`,
		`      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]`,
		`        runtime_type = 'io.containerd.runc.v2'`,
		`        runtime_path = ` + q(filepath.Join(bin, "containerd-shim-runc-v2")),
		`        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]`,
		`          BinaryName = ` + q(filepath.Join(bin, "runc")),
		`          SystemdCgroup = false`,
	}
	for _, r := range nvidia {
		h := `      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.` + q(r.RuntimeClass) + `]`
		lines = append(lines, h,
			`        runtime_type = 'io.containerd.runc.v2'`,
			`        runtime_path = `+q(filepath.Join(bin, "containerd-shim-runc-v2")),
			strings.TrimSuffix(h, "]")+`.options]`,
			`          BinaryName = `+q(r.wrapper()),
			`          SystemdCgroup = false`)
	}
	lines = append(lines,
		`    [plugins.'io.containerd.cri.v1.runtime'.cni]`,
		`      bin_dirs = [`+q(filepath.Join(bin, "cni"))+`]`,
		`      conf_dir = `+q(filepath.Join(dir, "cni")),
		`  [plugins.'io.containerd.nri.v1.nri']`,
		`    disable = true`,
		``)
	return strings.Join(lines, "\n")
}

// loopbackCNI is the node's only network configuration: pods use the host's
// network (hostNetwork: true); CNI needs a configuration all the same, or
// containerd reports the network not ready and the node never is Ready.
const loopbackCNI = `{"cniVersion": "1.0.0", "name": "loopback", "plugins": [{"type": "loopback"}]}`

func (n *Node) startContainerd(ctx context.Context) error {
	// runc on containerd's PATH too, for containers started without the
	// CRI (ctr run), whose runtime options name no binary.
	path := "PATH=" + n.bin + ":" + os.Getenv("PATH")
	p, err := startProc(filepath.Join(n.LogDir, "containerd.log"), []string{path}, filepath.Join(n.bin, "containerd"),
		"--config", filepath.Join(n.Dir, "containerd.toml"))
	if err != nil {
		return err
	}
	n.containerd = p
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := n.Ctr("version")
		if err == nil {
			return nil
		}
		if p.Exited() || time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("containerd not serving: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (n *Node) writeContainerdConfig() error {
	if err := os.MkdirAll(filepath.Join(n.Dir, "cni"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(n.Dir, "cni", "10-loopback.conflist"), []byte(loopbackCNI), 0o644); err != nil {
		return err
	}
	if err := n.writeNVIDIARuntimes(); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(n.Dir, "containerd.toml"), []byte(containerdConfig(n.Dir, n.bin, n.CDISpecDir, n.nvidia)), 0o644)
}

// Ctr runs containerd's ctr against the node's containerd, in the CRI's
// namespace k8s.io, and returns its output.
func (n *Node) Ctr(args ...string) (string, error) {
	return execOutput(filepath.Join(n.bin, "ctr"), append([]string{"--address", ContainerdSocket, "--namespace", "k8s.io"}, args...)...)
}

// Import writes im as an OCI archive and imports it into containerd, for
// pods with imagePullPolicy Never.
func (n *Node) Import(im Image) error {
	f, err := os.CreateTemp(n.Dir, "image-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := im.WriteArchive(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if _, err := n.Ctr("images", "import", f.Name()); err != nil {
		return fmt.Errorf("import %s: %w", im.Name, err)
	}
	return nil
}

// killContainers kills and deletes every task and container containerd
// runs in k8s.io, sandboxes included, so that their shims exit and their
// mounts go. A single kill or delete may fail as the CRI cleans up beside
// it (not found, ttrpc closed); what counts is that no task is left.
func (n *Node) killContainers() error {
	tasks, err := n.Ctr("tasks", "ls", "--quiet")
	if err != nil {
		return err
	}
	for _, id := range strings.Fields(tasks) {
		_, _ = n.Ctr("tasks", "kill", "--all", "--signal", "SIGKILL", id)
	}
	for _, id := range strings.Fields(tasks) {
		_, _ = n.Ctr("tasks", "delete", "--force", id)
	}
	containers, err := n.Ctr("containers", "ls", "--quiet")
	if err != nil {
		return err
	}
	for _, id := range strings.Fields(containers) {
		_, _ = n.Ctr("containers", "delete", id)
	}
	if left, err := n.Ctr("tasks", "ls", "--quiet"); err != nil || strings.TrimSpace(left) != "" {
		return fmt.Errorf("tasks left after killing them all: %q %w", strings.Fields(left), err)
	}
	return nil
}
