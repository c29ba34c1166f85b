package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuadmit/gpuadmit/test/e2e/cluster"
)

// Options say where the binaries are and how to start the control plane.
type Options struct {
	// BinDir holds the control plane (hack/e2e-binaries.sh) and the node
	// (hack/node-binaries.sh); required.
	BinDir string
	// Root is the repository root, the cluster's Options.Root; required.
	Root string
	// Name is the node's name and its Hostname address, by which the API
	// server reaches the kubelet; it must resolve to 127.0.0.1. Empty means
	// "localhost", which does everywhere without editing /etc/hosts.
	Name string
	// Cluster are the control plane's options; BinDir, Root and LogDir are
	// set from these, the API server flags and controllers a real node needs
	// are added, and kwok is never started (it would take the real node
	// over). The zero value starts the scheduler and gpuadmit's webhook.
	Cluster cluster.Options
}

// Node is a control plane with one real node: a kubelet and containerd
// with runc on this machine. Its Stop undoes everything Start did.
type Node struct {
	Cluster *cluster.Cluster
	Client  kubernetes.Interface
	// Name is the node's name.
	Name string
	// Dir holds containerd's root and state, the configurations, the CNI
	// configuration and the pods' logs; Stop removes it.
	Dir string
	// LogDir holds every component's log (the control plane's too); it is
	// left for the caller, who keeps it when something failed.
	LogDir string
	// CDISpecDir is the node's own CDI spec directory, under Dir, which
	// containerd and the NVIDIA runtimes read before /etc/cdi and
	// /var/run/cdi: where a test puts the node-wide spec an admin would
	// write to /etc/cdi (nvidia-ctk cdi generate), leaving this machine's
	// /etc/cdi alone.
	CDISpecDir string

	bin        string // BinDir with symlinks resolved
	containerd *cluster.Proc
	// nvidia are the NVIDIA runtime handlers (NVIDIARuntime); none when
	// BinDir has no nvidia-container-runtime.
	nvidia  []NVIDIARuntime
	kubelet *cluster.Proc
	// ownLogLinks says ContainerLogLinks did not exist before Start, so
	// Stop removes it (when empty).
	ownLogLinks bool
}

// Start brings up the control plane and the node, imports the sandbox and
// busybox images and waits for the node to be Ready. Check's conditions
// must hold. On error everything already started is stopped.
func Start(ctx context.Context, opts Options) (n *Node, err error) {
	if err := Check(opts.BinDir); err != nil {
		return nil, err
	}
	n = &Node{Name: opts.Name}
	if n.Name == "" {
		n.Name = "localhost"
	}
	defer func() {
		if err != nil {
			err = errors.Join(fmt.Errorf("%w (logs in %s)", err, n.LogDir), n.Stop())
		}
	}()
	if n.bin, err = filepath.EvalSymlinks(opts.BinDir); err != nil {
		return n, err
	}
	if _, err := os.Stat(ContainerLogLinks); errors.Is(err, os.ErrNotExist) {
		n.ownLogLinks = true
	}
	if n.Dir, err = os.MkdirTemp("", "gpuadmit-node-"); err != nil {
		return n, err
	}
	if n.LogDir, err = os.MkdirTemp("", "gpuadmit-node-logs-"); err != nil {
		return n, err
	}
	n.CDISpecDir = filepath.Join(n.Dir, "cdi")
	n.nvidia = nvidiaRuntimes(n.Dir, n.LogDir, n.bin)
	if err := n.startCluster(ctx, opts); err != nil {
		return n, fmt.Errorf("step control plane: %w", err)
	}
	if err := n.createRuntimeClasses(ctx); err != nil {
		return n, fmt.Errorf("step runtime classes: %w", err)
	}
	if err := n.writeContainerdConfig(); err != nil {
		return n, err
	}
	if err := n.startContainerd(ctx); err != nil {
		return n, fmt.Errorf("step containerd: %w", err)
	}
	if err := n.importImages(); err != nil {
		return n, fmt.Errorf("step images: %w", err)
	}
	if err := n.writeKubeletConfig(); err != nil {
		return n, err
	}
	since := time.Now()
	if err := n.startKubelet(); err != nil {
		return n, fmt.Errorf("step kubelet: %w", err)
	}
	if err := n.waitReady(ctx, since); err != nil {
		return n, fmt.Errorf("step node ready: %w", err)
	}
	return n, nil
}

// startCluster starts the control plane as a real kubelet needs it:
//   - authorization Node,RBAC and NodeRestriction admission, so the
//     kubelet's identity limits it as in a real cluster;
//   - ServiceAccount admission back on (envtest turns it off), so pods get
//     token volumes, and the controller-manager's root-CA publisher for their
//     kube-root-ca.crt;
//   - no endpoint reconciler: the API server would publish its own address
//     as the kubernetes Service's endpoint, which a loopback one cannot be;
//   - the kubelet reached by the node's Hostname address (its name), as the
//     kubelet refuses a loopback node IP and serves on 127.0.0.1 only;
//   - the node-lifecycle controller, which lifts the not-ready taint;
//   - the deployment controller, which the cluster package does not run
//     (its tests create pods and ReplicaSets), for the Install tests'
//     Deployments (gpuadmit's, docs/install.md's example);
//   - the device-taint eviction controller (DRADeviceTaints, GA and on by
//     default in v1.37, but not among the controllers the cluster package
//     runs), which evicts the pods of claims whose device carries a
//     NoExecute taint: the DRA driver's gpu.gpuadmit.io/gone.
func (n *Node) startCluster(ctx context.Context, opts Options) error {
	co := opts.Cluster
	co.BinDir, co.Root, co.LogDir = opts.BinDir, opts.Root, n.LogDir
	if !slices.Contains(co.Skip, "kwok") {
		co.Skip = append(slices.Clip(co.Skip), "kwok")
	}
	co.APIServerArgs = mergeArgs(co.APIServerArgs, map[string][]string{
		"authorization-mode":              {"Node,RBAC"},
		"enable-admission-plugins":        {"NodeRestriction"},
		"disable-admission-plugins":       {""},
		"endpoint-reconciler-type":        {"none"},
		"kubelet-preferred-address-types": {"Hostname"},
	})
	co.Controllers = append(slices.Clip(co.Controllers), "node-lifecycle-controller", "root-ca-certificate-publisher-controller", "device-taint-eviction-controller", "deployment-controller")
	c, err := cluster.Start(ctx, co)
	if err != nil {
		return err
	}
	n.Cluster = c
	if n.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return err
	}
	return n.WaitServiceAccount(ctx, metav1.NamespaceDefault)
}

// mergeArgs is base with the flags of add that base does not set.
func mergeArgs(base, add map[string][]string) map[string][]string {
	out := map[string][]string{}
	for k, v := range add {
		out[k] = v
	}
	for k, v := range base {
		out[k] = v
	}
	return out
}

func (n *Node) importImages() error {
	busybox, err := busyboxImage(busyboxPath)
	if err != nil {
		return err
	}
	for _, im := range []Image{pauseImage(filepath.Join(n.bin, "pause")), busybox} {
		if err := n.Import(im); err != nil {
			return err
		}
	}
	return nil
}

// Stop stops the kubelet, kills every container, stops containerd, unmounts
// everything mounted under the kubelet's, containerd's and the node's
// directories and removes them, removes the kubelet's cgroups and log links,
// and stops the control plane. It reports what it could not undo.
func (n *Node) Stop() error {
	var errs []error
	if n.kubelet != nil {
		n.kubelet.Stop()
	}
	if n.containerd != nil && !n.containerd.Exited() {
		errs = append(errs, n.killContainers())
		n.containerd.Stop()
	}
	if shim, err := filepath.EvalSymlinks(filepath.Join(n.bin, "containerd-shim-runc-v2")); err == nil {
		killShims(shim)
	}
	if n.Dir != "" {
		errs = append(errs, removeUnmounted(KubeletDir, ContainerdRunDir, n.Dir))
		errs = append(errs, removeLogLinks(filepath.Join(n.Dir, "pod-logs")))
	}
	if n.ownLogLinks {
		_ = os.Remove(ContainerLogLinks) // only if empty
	}
	errs = append(errs, removeCgroups(), removeSpecs())
	if n.Cluster != nil {
		n.Cluster.Stop()
	}
	return errors.Join(errs...)
}
