package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// The install docs/install.md describes, run as a newcomer runs it
// (install_test.go).
//
// docs/install.md marks each block of commands a test runs with an HTML comment,
// `<!-- install-test: NAME -->`, on the line before its fence. A test
// copies the checkout (what `git ls-files` lists, as a clone has it), puts
// the repository's kubectl v1.37.0, helm and ctr first on PATH, and runs
// the blocks' commands there with bash, one by one, changing only what this
// machine needs (Substitution): the node has no kube-proxy and no pod
// network, so the webhook is called at a loopback URL and gpuadmit's pods
// run on the host network and reach the API server at its loopback address.

// installMarker starts a tested block; the next line opens its fence.
var installMarker = regexp.MustCompile(`^\s*<!-- install-test: ([a-z0-9-]+) -->\s*$`)

// installDoc is the page, relative to the repository root, whose marked
// blocks the Install tests run.
const installDoc = "docs/install.md"

// InstallBlocks returns the commands of every marked block of a page: the
// fence's lines without its indentation, a line ending in a backslash
// joined with the next, blank lines and comment lines dropped. A marker
// whose next line is no fence, a block without its closing fence, or a
// name used twice is an error.
func InstallBlocks(page []byte) (map[string][]string, error) {
	lines := strings.Split(string(page), "\n")
	blocks := map[string][]string{}
	for i := 0; i < len(lines); i++ {
		m := installMarker.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		if _, dup := blocks[m[1]]; dup {
			return nil, fmt.Errorf("line %d: block %q marked twice", i+1, m[1])
		}
		cmds, end, err := fencedCommands(lines, i+1)
		if err != nil {
			return nil, fmt.Errorf("block %q (line %d): %w", m[1], i+1, err)
		}
		blocks[m[1]], i = cmds, end
	}
	return blocks, nil
}

// fencedCommands reads the fenced block that opens at lines[open] and
// returns its commands and the index of its closing fence.
func fencedCommands(lines []string, open int) ([]string, int, error) {
	if open >= len(lines) || strings.TrimSpace(lines[open]) != "```" {
		return nil, 0, errors.New("the marker must be followed by an opening ``` fence")
	}
	indent := strings.Repeat(" ", len(lines[open])-len(strings.TrimLeft(lines[open], " ")))
	var cmds []string
	cont := ""
	for i := open + 1; i < len(lines); i++ {
		text := strings.TrimPrefix(lines[i], indent)
		trimmed := strings.TrimSpace(text)
		if trimmed == "```" {
			if cont != "" {
				return nil, 0, errors.New("the last command ends in a backslash")
			}
			return cmds, i, nil
		}
		if cont == "" && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if s, ok := strings.CutSuffix(strings.TrimRight(text, " "), `\`); ok {
			cont += strings.TrimSpace(s) + " "
			continue
		}
		cmds = append(cmds, cont+trimmed)
		cont = ""
	}
	return nil, 0, errors.New("no closing ``` fence")
}

// Substitution is one change a test makes to docs/install.md's commands;
// Used counts the commands it changed, so a test can say that the page no
// longer has what it was meant for.
type Substitution struct {
	// Why says what this machine lacks that makes the change needed.
	Why  string
	Old  *regexp.Regexp
	New  string
	Used int
}

// Substitute changes cmd by every substitution and counts what each changed.
func Substitute(subs []*Substitution, cmd string) string {
	for _, s := range subs {
		if s.Old.MatchString(cmd) {
			cmd = s.Old.ReplaceAllString(cmd, s.New)
			s.Used++
		}
	}
	return cmd
}

// deniedComment marks an install command that is refused on purpose.
var deniedComment = regexp.MustCompile(`#\s*denied\b`)

// ExpectsDenial says whether an install command is one the webhook refuses
// (its comment starts "denied").
func ExpectsDenial(cmd string) bool { return deniedComment.MatchString(cmd) }

// copyCheckout copies what a clone of root holds (tracked files and new ones
// git does not ignore, as `git ls-files` lists them) to dst.
func copyCheckout(root, dst string) error {
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return fmt.Errorf("git ls-files in %s: %w", root, err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src, to := filepath.Join(root, name), filepath.Join(dst, name)
		fi, err := os.Lstat(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree, not yet in the index
		}
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(src)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, to); err != nil {
				return err
			}
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := os.WriteFile(to, b, fi.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

// Ports the controller listens on when it runs on the host network beside
// the webhook, which holds deploy/base's 8080 and 8081.
const (
	machineControllerMetricsPort = "8090"
	machineControllerProbePort   = "8091"
)

// machinePatches are kustomize patches (a kustomization's patches list)
// that make gpuadmit's Deployments run on this machine, whose pods have
// no network but the host's and no kube-proxy: both reach the API server
// at its loopback address, and the controller (which deploy/base keeps off
// the host network) runs there too, one replica, on ports beside the
// webhook's. The test ops fail the render if the manifests change under
// the patches.
func machinePatches(apiServer string) (string, error) {
	u, err := url.Parse(apiServer)
	if err != nil {
		return "", err
	}
	env := fmt.Sprintf(`      - {op: add, path: /spec/template/spec/containers/0/env/-, value: {name: KUBERNETES_SERVICE_HOST, value: %q}}
      - {op: add, path: /spec/template/spec/containers/0/env/-, value: {name: KUBERNETES_SERVICE_PORT, value: %q}}
`, u.Hostname(), u.Port())
	c := "/spec/template/spec/containers/0"
	return `  - target: {group: apps, kind: Deployment, name: gpuadmit-webhook}
    patch: |-
` + env + `  - target: {group: apps, kind: Deployment, name: gpuadmit-controller}
    patch: |-
      - {op: replace, path: /spec/replicas, value: 1}
      - {op: add, path: /spec/template/spec/hostNetwork, value: true}
      - {op: add, path: /spec/template/spec/dnsPolicy, value: ClusterFirstWithHostNet}
      - {op: test, path: ` + c + `/args/1, value: "--metrics-bind-address=:8080"}
      - {op: replace, path: ` + c + `/args/1, value: "--metrics-bind-address=:` + machineControllerMetricsPort + `"}
      - {op: test, path: ` + c + `/args/2, value: "--health-probe-bind-address=:8081"}
      - {op: replace, path: ` + c + `/args/2, value: "--health-probe-bind-address=:` + machineControllerProbePort + `"}
      - {op: test, path: ` + c + `/ports/0/name, value: metrics}
      - {op: replace, path: ` + c + `/ports/0/containerPort, value: ` + machineControllerMetricsPort + `}
      - {op: test, path: ` + c + `/ports/1/name, value: health}
      - {op: replace, path: ` + c + `/ports/1/containerPort, value: ` + machineControllerProbePort + `}
` + env, nil
}

// writeMachineOverlay writes, in the checkout dir, the kustomize overlay
// deploy/overlays/e2e-node: dev-loopback with machinePatches. It returns
// the overlay's path relative to dir.
func WriteMachineOverlay(dir, apiServer string) (string, error) {
	patches, err := machinePatches(apiServer)
	if err != nil {
		return "", err
	}
	rel := "deploy/overlays/e2e-node"
	k := "# Written by test/e2e/node's Install tests: dev-loopback on a machine\n" +
		"# without kube-proxy or a pod network (install.go, machinePatches).\n" +
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../dev-loopback\npatches:\n" + patches
	if err := os.MkdirAll(filepath.Join(dir, rel), 0o755); err != nil {
		return "", err
	}
	return rel, os.WriteFile(filepath.Join(dir, rel, "kustomization.yaml"), []byte(k), 0o644)
}

// writeHelmPostRenderer writes under dir a Helm post-renderer that applies
// machinePatches to the chart's manifests with kubectl's kustomize, and
// returns its path.
func WriteHelmPostRenderer(dir, kubectl, apiServer string) (string, error) {
	patches, err := machinePatches(apiServer)
	if err != nil {
		return "", err
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - chart.yaml\npatches:\n" + patches
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		return "", err
	}
	script := filepath.Join(dir, "post-render.sh")
	body := fmt.Sprintf("#!/bin/sh\nset -e\ncat > %q\nexec %q kustomize %q\n", filepath.Join(dir, "chart.yaml"), kubectl, dir)
	return script, os.WriteFile(script, []byte(body), 0o755)
}

// commandResult is what one install command did.
type commandResult struct {
	Cmd            string // as run, after the substitutions
	Stdout, Stderr string
	Err            error
	Took           time.Duration
}

// runShell runs cmd with bash in dir with env, within timeout.
func runShell(ctx context.Context, dir string, env []string, timeout time.Duration, cmd string) commandResult {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", cmd)
	c.Dir, c.Env = dir, env
	c.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	start := time.Now()
	err := c.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%w after %s", ctx.Err(), timeout)
	}
	return commandResult{Cmd: cmd, Stdout: stdout.String(), Stderr: stderr.String(), Err: err, Took: time.Since(start)}
}

// harnessFiles are the deploy/base files the cluster package creates for
// its own gpuadmit (cluster.Start's grantWebhook).
var harnessFiles = []string{"namespace.yaml", "serviceaccount.yaml", "rbac.yaml", "recordpolicy.yaml", "controller-policy.yaml"}

// withoutHarnessGpuadmit takes out the gpuadmit the control plane starts
// with (its webhook and controller in the test process, the webhook
// configuration envtest registered, deploy/base's namespace, accounts, RBAC
// and admission policies), so that the cluster is one gpuadmit was never
// installed on. The returned function puts it all back.
func (n *Node) withoutHarnessGpuadmit(ctx context.Context, root string) (restore func() error, err error) {
	n.Cluster.StopWebhook()
	mwcs := n.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	saved, err := mwcs.Get(ctx, "gpuadmit", metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get the harness's webhook configuration: %w", err)
	}
	saved.ResourceVersion, saved.UID, saved.ManagedFields = "", "", nil
	restore = func() error {
		var errs []error
		for _, f := range harnessFiles {
			errs = append(errs, n.Cluster.Apply(ctx, filepath.Join(root, "deploy/base", f)))
		}
		if _, err := mwcs.Create(ctx, saved, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, err)
		}
		errs = append(errs, n.Cluster.StartWebhook(ctx))
		return errors.Join(errs...)
	}
	if err := mwcs.Delete(ctx, saved.Name, metav1.DeleteOptions{}); err != nil {
		return restore, err
	}
	for _, f := range harnessFiles {
		if err := n.deleteFile(ctx, filepath.Join(root, "deploy/base", f)); err != nil {
			return restore, err
		}
	}
	return restore, n.waitNamespaceGone(ctx, "gpuadmit-system", 2*time.Minute)
}

// deleteFile deletes every object of a YAML stream, as kubectl delete -f.
func (n *Node) deleteFile(ctx context.Context, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dyn, mapper, err := n.dynamic()
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		o := &unstructured.Unstructured{}
		if err := dec.Decode(&o.Object); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		if len(o.Object) == 0 {
			continue
		}
		m, err := mapper.RESTMapping(o.GroupVersionKind().GroupKind(), o.GroupVersionKind().Version)
		if err != nil {
			return err
		}
		err = dyn.Resource(m.Resource).Namespace(o.GetNamespace()).Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
}

func (n *Node) dynamic() (dynamic.Interface, meta.RESTMapper, error) {
	dyn, err := dynamic.NewForConfig(n.Cluster.Config)
	if err != nil {
		return nil, nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(n.Cluster.Config)
	if err != nil {
		return nil, nil, err
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		return nil, nil, err
	}
	return dyn, restmapper.NewDiscoveryRESTMapper(groups), nil
}

func (n *Node) waitNamespaceGone(ctx context.Context, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		_, err := n.Client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace %s still there after %s (err %v)", name, timeout, err)
		}
		time.Sleep(time.Second)
	}
}

// Objects lists every object the API server holds but Events (which
// outlive what they are about by design), the kubelets' heartbeat Leases
// and ResourceSlices (a node's DRA drivers' devices, which the kubelet
// removes some time after an earlier test's driver went), as
// "resource.group namespace/name".
func (n *Node) Objects(ctx context.Context) (map[string]bool, error) {
	dyn, err := dynamic.NewForConfig(n.Cluster.Config)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(n.Cluster.Config)
	if err != nil {
		return nil, err
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil {
		return nil, err
	}
	objs := map[string]bool{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			return nil, err
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || r.Name == "events" || r.Name == "resourceslices" {
				continue
			}
			list, err := dyn.Resource(gv.WithResource(r.Name)).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, fmt.Errorf("list %s: %w", r.Name, err)
			}
			for _, o := range list.Items {
				if r.Name == "leases" && o.GetNamespace() == corev1.NamespaceNodeLease {
					continue
				}
				objs[fmt.Sprintf("%s.%s %s/%s", r.Name, gv.Group, o.GetNamespace(), o.GetName())] = true
			}
		}
	}
	return objs, nil
}
