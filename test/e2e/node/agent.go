package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/gpuadmit/gpuadmit/deploy"
	"github.com/gpuadmit/gpuadmit/internal/fakegpu"
	"github.com/gpuadmit/gpuadmit/internal/ociimage"
)

// AgentImage is gpuadmit's node agent built with the fake NVML
// (-tags gpuadmit_fakenvml), imported by BuildAgentImage.
const AgentImage = "gpuadmit.local/gpuadmit-agent:e2e"

// BuildAgentImage builds cmd/agent of the repository at root with the fake
// NVML and imports it as AgentImage: the binary as /gpuadmit-agent (the
// entrypoint deploy/agent's DaemonSets run) and, as go-nvml makes it a cgo
// binary, the shared libraries ldd names for it and those the driver's
// NVML needs (ociimage.DriverSharedLibraries), at their paths, as
// `make images` builds it.
//
// Where $GPUADMIT_AGENT_BIN names a built agent, that binary is imported
// instead and nothing is built: on a GPU machine, which has no Go, the
// hardware bundle (hack/gpu/node-bundle.sh) brings the shipped agent,
// built without the fake NVML.
func (n *Node) BuildAgentImage(root string) error {
	bin := os.Getenv("GPUADMIT_AGENT_BIN")
	if bin == "" {
		bin = filepath.Join(n.Dir, "gpuadmit-agent")
		cmd := exec.Command("go", "build", "-tags", "gpuadmit_fakenvml", "-trimpath", "-o", bin, "./cmd/agent")
		cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build the agent with the fake NVML: %w\n%s", err, out)
		}
	}
	im := Image{Name: AgentImage, Files: map[string]string{"/gpuadmit-agent": bin}, Entrypoint: []string{"/gpuadmit-agent"}, Env: []string{}}
	libs, err := ociimage.DriverSharedLibraries(bin)
	if err != nil {
		return fmt.Errorf("shared libraries of the agent: %w", err)
	}
	if len(libs) == 0 {
		return fmt.Errorf("shared libraries of the agent: ldd named none, yet go-nvml makes it a cgo binary")
	}
	for inImage, here := range libs {
		im.Files[inImage] = here
	}
	return n.Import(im)
}

// FakeGPUs are a node's fake GPUs: a driver root on the host that nvcdi
// accepts, with the real nvidia-cdi-hook (the one hack/node-binaries.sh
// builds) that runc runs for the CDI specs' hooks, and the fake NVML's
// configuration and control file inside it, which the agent reads through
// its driver-root mount.
type FakeGPUs struct {
	fakegpu.Root
	// UUIDs are the GPUs' UUIDs; GPU i is /dev/nvidia<i>.
	UUIDs []string
	// Control is the host path of the fake NVML's control file.
	Control string
}

// Where the fake NVML's files are inside a fake driver root, and where the
// agent's DaemonSets mount the driver root.
const (
	fakeNVMLDir     = "fakegpu"
	agentDriverRoot = "/driver-root"
)

// NewFakeGPUs makes a driver root in the node's directory with the GPUs
// configured, GPU i as gpus[i]: each answers as its NVML reading (a file
// in pkg/allocator/testdata/nvml under root), its UUID fakegpu.UUID(i).
func (n *Node) NewFakeGPUs(root string, gpus ...fakegpu.GPUConfig) (*FakeGPUs, error) {
	dir, err := os.MkdirTemp(n.Dir, "driver-root-")
	if err != nil {
		return nil, err
	}
	minors := make([]int, len(gpus))
	cfg := fakegpu.Config{Readings: "readings", Control: "control.json", GPUs: gpus}
	g := &FakeGPUs{}
	readings := map[string]bool{}
	for i, c := range gpus {
		if c.UUID != "" {
			return nil, fmt.Errorf("fake GPU %d: the UUID is fakegpu.UUID(%d), not %q", i, i, c.UUID)
		}
		minors[i] = i
		g.UUIDs = append(g.UUIDs, fakegpu.UUID(i))
		readings[c.Reading] = true
	}
	if g.Root, err = fakegpu.MakeRoot(dir, filepath.Join(n.bin, "nvidia-cdi-hook"), minors...); err != nil {
		return nil, fmt.Errorf("fake driver root: %w", err)
	}
	nv := filepath.Join(dir, fakeNVMLDir)
	if err := os.MkdirAll(filepath.Join(nv, "readings"), 0o755); err != nil {
		return nil, err
	}
	if err := g.migCaps(&cfg, nv); err != nil {
		return nil, err
	}
	for r := range readings {
		b, err := os.ReadFile(filepath.Join(root, "pkg/allocator/testdata/nvml", r))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(nv, "readings", r), b, 0o644); err != nil {
			return nil, err
		}
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	g.Control = filepath.Join(nv, "control.json")
	if err := os.WriteFile(filepath.Join(nv, "config.json"), b, 0o644); err != nil {
		return nil, err
	}
	return g, sharedMount(dir)
}

// procDriverDir is the directory in the fake NVML's that stands for
// /proc/driver, in the agent's container only.
const procDriverDir = "proc-driver"

// migCaps gives the GPUs in MIG mode what nvcdi needs to make their MIG
// devices' edits: the nvidia-caps device nodes of each GPU instance
// configured (and its compute instance 0) in the root's dev/, and the
// driver's mig-minors file in the directory the agent mounts over its
// container's /proc/driver (fakegpu.MountProcDriver), which cfg names. A
// node without MIG gets neither, and its agent mounts nothing.
func (g *FakeGPUs) migCaps(cfg *fakegpu.Config, nv string) error {
	for i, c := range cfg.GPUs {
		if len(c.MIG) == 0 {
			continue
		}
		gis := make([]uint32, len(c.MIG))
		for j := range c.MIG {
			gis[j] = uint32(j + 1) // fakegpu numbers the GPU instances 1, 2, … in order
		}
		if err := g.MIGCaps(i, gis...); err != nil {
			return fmt.Errorf("fake driver root: %w", err)
		}
		cfg.ProcDriver = procDriverDir
	}
	if cfg.ProcDriver == "" {
		return nil
	}
	return fakegpu.WriteProcDriver(filepath.Join(nv, procDriverDir), len(cfg.GPUs))
}

// sharedMount makes dir a mount point of its own with shared propagation.
// The agent's DaemonSets mount the driver root with HostToContainer
// propagation (a containerized driver's root appears after the agent
// starts), which containerd refuses unless the host path is on a shared
// or slave mount. A node's / is shared (systemd makes it so); these
// machines' / is private, so the fake root is made its own shared mount,
// which Unmount (or the node's Stop) undoes.
func sharedMount(dir string) error {
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind mount %s: %w", dir, err)
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		return errors.Join(fmt.Errorf("make %s shared: %w", dir, err), unix.Unmount(dir, unix.MNT_DETACH))
	}
	return nil
}

// Unmount undoes NewFakeGPUs' mount; the files stay until the node stops.
func (g *FakeGPUs) Unmount() error {
	if err := unix.Unmount(g.Dir, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmount fake driver root %s: %w", g.Dir, err)
	}
	return nil
}

// DriverRoot is the NVIDIA driver root on the host that the agent's
// DaemonSet mounts: a fake one (FakeGPUs) or a GPU machine's own
// (HostDriver).
type DriverRoot interface {
	// overlay is the host directory to mount as the driver root and the
	// agent's flags that go with it.
	overlay() (dir string, flags map[string]string)
}

func (g *FakeGPUs) overlay() (string, map[string]string) {
	return g.Dir, map[string]string{
		"--driver-root":           g.Dir,
		"--container-driver-root": agentDriverRoot,
		"--nvidia-cdi-hook-path":  g.HookPath,
		"--fake-nvml":             filepath.Join(agentDriverRoot, fakeNVMLDir, "config.json"),
	}
}

// Agent is gpuadmit's node agent running as its DaemonSet on the node.
type Agent struct {
	// DaemonSet is the DaemonSet as created.
	DaemonSet *appsv1.DaemonSet
	objects   []*unstructured.Unstructured
}

// DeployAgent creates every object of the kustomization dir under the
// repository root (deploy/agent, deploy/dra, deploy/overlays/agent-mps)
// as shipped, but of its DaemonSets only the one named daemonSet (not
// publish mode's, nor the MPS control daemon's, which runs NVIDIA's
// daemon), and that one as shipped except what the test node needs (the
// test overlay): AgentImage, never pulled; the host's
// network, with KUBERNETES_SERVICE_HOST and _PORT set to the API server's
// loopback address (there is no kube-proxy); --driver-root the driver's
// root, mounted where the manifest mounts the driver root, with the
// nvidia-cdi-hook (for fake GPUs in their root), and for fake GPUs
// --fake-nvml naming their configuration. It
// labels the node with labels, so the DaemonSet's selector picks it, and
// waits until the agent's pod runs. args ("--flag=value") are set on the
// agent too. The agent runs as the manifests' ServiceAccount with their
// RBAC and ValidatingAdmissionPolicies.
func (n *Node) DeployAgent(ctx context.Context, root, dir, daemonSet string, driver DriverRoot, labels map[string]string, args ...string) (*Agent, error) {
	objs, err := render(root, dir)
	if err != nil {
		return nil, err
	}
	a := &Agent{}
	for _, o := range objs {
		if o.GetKind() == "DaemonSet" && o.GetName() == daemonSet {
			if a.DaemonSet, err = n.testOverlay(o, driver, args); err != nil {
				return nil, err
			}
		}
	}
	if a.DaemonSet == nil {
		return nil, fmt.Errorf("%s renders no DaemonSet %s", dir, daemonSet)
	}
	for _, o := range objs {
		if o.GetKind() == "DaemonSet" && o.GetName() != daemonSet {
			continue
		}
		if err := n.Cluster.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return a, fmt.Errorf("create %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		a.objects = append(a.objects, o)
	}
	if err := n.label(ctx, labels); err != nil {
		return a, err
	}
	_, err = n.AgentPod(ctx, a, 2*time.Minute)
	return a, err
}

// render builds the kustomization dir under root with the kustomize
// hack/tools.sh installs (in .bin/tools, or $GPUADMIT_TOOLS).
func render(root, dir string) ([]*unstructured.Unstructured, error) {
	tools := os.Getenv("GPUADMIT_TOOLS")
	if tools == "" {
		tools = filepath.Join(root, ".bin/tools")
	}
	dir = filepath.Join(root, dir)
	t, missing := deploy.FindTools(tools)
	if slices.Contains(missing, "kustomize") {
		return nil, fmt.Errorf("%w: kustomize missing in %s; run hack/tools.sh", ErrUnavailable, tools)
	}
	stream, err := t.Build(dir)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(string(stream), "\n---\n") {
		o := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal([]byte(doc), &o.Object); err != nil {
			return nil, fmt.Errorf("render %s: %w", dir, err)
		}
		if len(o.Object) > 0 {
			objs = append(objs, o)
		}
	}
	return objs, nil
}

// testOverlay edits the DaemonSet o in place as DeployAgent says.
func (n *Node) testOverlay(o *unstructured.Unstructured, driver DriverRoot, args []string) (*appsv1.DaemonSet, error) {
	ds := &appsv1.DaemonSet{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, ds); err != nil {
		return nil, err
	}
	api, err := url.Parse(n.Cluster.Config.Host)
	if err != nil {
		return nil, err
	}
	dir, set := driver.overlay()
	spec := &ds.Spec.Template.Spec
	spec.HostNetwork = true
	for i := range spec.Volumes {
		if v := &spec.Volumes[i]; v.Name == "driver-root" && v.HostPath != nil {
			v.HostPath.Path = dir
		}
	}
	c := &spec.Containers[0]
	c.Image, c.ImagePullPolicy = AgentImage, corev1.PullNever
	c.Env = append(c.Env, corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: api.Hostname()},
		corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: api.Port()})
	for _, a := range args {
		name, value, _ := strings.Cut(a, "=")
		set[name] = value
	}
	c.Args = slices.DeleteFunc(c.Args, func(a string) bool {
		name, _, _ := strings.Cut(a, "=")
		_, ok := set[name]
		return ok
	})
	for _, name := range slices.Sorted(maps.Keys(set)) {
		c.Args = append(c.Args, name+"="+set[name])
	}
	if o.Object, err = runtime.DefaultUnstructuredConverter.ToUnstructured(ds); err != nil {
		return nil, err
	}
	return ds, nil
}

// label sets (or with an empty value removes) labels on the node.
func (n *Node) label(ctx context.Context, labels map[string]string) error {
	patch := map[string]any{}
	for k, v := range labels {
		if v == "" {
			patch[k] = nil
		} else {
			patch[k] = v
		}
	}
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": patch}})
	if _, err := n.Client.CoreV1().Nodes().Patch(ctx, n.Name, "application/merge-patch+json", b, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("label node %s: %w", n.Name, err)
	}
	return nil
}

// AgentPod waits until the agent's DaemonSet runs a pod on the node,
// running and ready, and returns it.
func (n *Node) AgentPod(ctx context.Context, a *Agent, timeout time.Duration) (*corev1.Pod, error) {
	ds := a.DaemonSet
	sel := metav1.FormatLabelSelector(ds.Spec.Selector)
	var last string
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		pods, err := n.Client.CoreV1().Pods(ds.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			last = err.Error()
			continue
		}
		last = fmt.Sprintf("%d pods", len(pods.Items))
		for i := range pods.Items {
			p := &pods.Items[i]
			last = podState(p)
			if p.DeletionTimestamp == nil && Running(p) && p.Status.ContainerStatuses[0].Ready {
				return p, nil
			}
			if failing(p) {
				return nil, fmt.Errorf("agent pod %s/%s fails: %s", p.Namespace, p.Name, last)
			}
		}
	}
	return nil, fmt.Errorf("agent DaemonSet %s/%s has no running pod on %s after %s: %s", ds.Namespace, ds.Name, n.Name, timeout, last)
}

// failing says a pod's container cannot be created or keeps crashing:
// waiting longer would not make it run.
func failing(p *corev1.Pod) bool {
	for _, s := range p.Status.ContainerStatuses {
		if w := s.State.Waiting; w != nil && (w.Reason == "CreateContainerError" || w.Reason == "CrashLoopBackOff" || w.Reason == "ErrImageNeverPull") {
			return true
		}
	}
	return false
}

// RemoveAgent deletes what DeployAgent created but the namespace, in
// reverse order, takes the
// labels off the node, and waits until the agent's pods are gone.
func (n *Node) RemoveAgent(ctx context.Context, a *Agent, labels map[string]string) error {
	var errs []error
	off := map[string]string{}
	for k := range labels {
		off[k] = ""
	}
	if err := n.label(ctx, off); err != nil {
		errs = append(errs, err)
	}
	for _, o := range slices.Backward(a.objects) {
		if o.GetKind() == "Namespace" {
			continue // kept for the next agent: a namespace takes long to go
		}
		if err := n.Cluster.Client.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	ds := a.DaemonSet
	sel := metav1.FormatLabelSelector(ds.Spec.Selector)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(250 * time.Millisecond) {
		pods, err := n.Client.CoreV1().Pods(ds.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err == nil && len(pods.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			errs = append(errs, fmt.Errorf("agent pods of %s/%s still there a minute after its deletion", ds.Namespace, ds.Name))
			break
		}
	}
	return errors.Join(errs...)
}
