package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/gpuadmit/gpuadmit/pkg/offline"
)

// TestInstallDocBlocks: docs/install.md's blocks the Install tests run
// are there and read as commands (no node needed); this fails first when
// an edit of that page breaks a marker or a fence.
func TestInstallDocBlocks(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(installDoc)))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := InstallBlocks(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"images", "dev-install", "try", "try-cleanup", "dev-uninstall", "helm-install", "helm-uninstall"} {
		if len(blocks[name]) == 0 {
			t.Errorf("%s has no commands marked <!-- install-test: %s -->", installDoc, name)
		}
	}
	helm := blocks["helm-install"]
	if len(helm) < 2 || !strings.HasPrefix(helm[1], "helm install gpuadmit deploy/helm/gpuadmit --set certificates.mode=secret --set-file") {
		t.Errorf("helm-install's second command is not the whole helm install, continuation lines joined: %q", helm)
	}
}

// TestInstallDevOverlay installs gpuadmit on the real node as docs/install.md's
// five-minute path says — `make images` and `ctr images import`,
// `gpuadmit certs` and `kubectl apply -k` of the dev overlay, `kubectl
// rollout status` — tries the page's examples and a Deployment, checks
// what a user sees, and uninstalls as the page says, leaving nothing.
func TestInstallDevOverlay(t *testing.T) {
	in := newInstall(t)
	overlay, err := WriteMachineOverlay(in.dir, in.n.Cluster.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	in.subs = []*Substitution{
		{Why: "the API server calls the webhook at 127.0.0.1 (no kube-proxy), so its certificate names that address",
			Old: regexp.MustCompile(`(certs --out deploy/overlays/dev/certs)`), New: "$1 --ip 127.0.0.1"},
		{Why: "no kube-proxy and no pod network: dev-loopback with the machine's patches",
			Old: regexp.MustCompile(`-k deploy/overlays/dev(\s|$)`), New: "-k " + overlay + "$1"},
	}
	in.uninstall = []string{"try-cleanup", "dev-uninstall"}
	in.run("images")
	in.run("dev-install")
	in.tryIt()
	in.uninstallAll()
}

// TestInstallHelm is TestInstallDevOverlay with docs/install.md's Helm install
// for clusters whose API server cannot reach pods through a Service
// (certificates.mode=secret, webhook.url, webhook.hostNetwork).
func TestInstallHelm(t *testing.T) {
	in := newInstall(t)
	render, err := WriteHelmPostRenderer(filepath.Join(filepath.Dir(in.dir), "post-render"), in.kubectl, in.n.Cluster.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	in.subs = []*Substitution{
		{Why: "the API server reaches the node at 127.0.0.1", Old: regexp.MustCompile(`10\.0\.0\.5`), New: "127.0.0.1"},
		{Why: "the node's name", Old: regexp.MustCompile(`<that node>`), New: in.n.Name},
		{Why: "no kube-proxy and no pod network: the machine's patches",
			Old: regexp.MustCompile(`^helm install `), New: "helm install --post-renderer " + render + " "},
	}
	in.uninstall = []string{"try-cleanup", "helm-uninstall"}
	in.run("images")
	in.run("helm-install")
	in.tryIt()
	in.uninstallAll()
}

// install is one run of docs/install.md's install on the node.
type install struct {
	t       *testing.T
	n       *Node
	ctx     context.Context
	dir     string // the copy of the checkout the commands run in
	env     []string
	kubectl string
	blocks  map[string][]string
	subs    []*Substitution
	// uninstall are the blocks that remove what the test installed; run
	// (ignoring errors) when the test stops before uninstallAll.
	uninstall   []string
	uninstalled bool
	before      map[string]bool // the cluster's objects before the install
}

func newInstall(t *testing.T) *install {
	n := requireNode(t)
	in := &install{t: t, n: n, ctx: context.Background(), kubectl: filepath.Join(n.bin, "kubectl")}
	tools := os.Getenv("GPUADMIT_TOOLS")
	if tools == "" {
		tools = filepath.Join(root, ".bin/tools")
	}
	for _, f := range []string{in.kubectl, filepath.Join(tools, "helm")} {
		if _, err := os.Stat(f); err != nil {
			if os.Getenv("GPUADMIT_REQUIRE_E2E") != "" {
				t.Fatalf("%s missing: hack/e2e-binaries.sh builds kubectl, hack/tools.sh installs helm (make test runs both)", f)
			}
			t.Skipf("SKIPPED, NOT TESTED: %s missing: hack/e2e-binaries.sh builds kubectl, hack/tools.sh installs helm", f)
		}
	}
	base := t.TempDir()
	in.dir = filepath.Join(base, "gpuadmit")
	if err := copyCheckout(root, in.dir); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"kubectl": in.kubectl, "helm": filepath.Join(tools, "helm"), "ctr": filepath.Join(n.bin, "ctr")} {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	in.env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "KUBECONFIG=") || strings.HasPrefix(kv, "GOFLAGS=")
	})
	// -trimpath keeps the copy's compiles in the build cache under a path
	// of their own making, so `go run` in a new temp dir is not a cold build.
	in.env = append(in.env, "PATH="+bin+":"+os.Getenv("PATH"), "KUBECONFIG="+n.Cluster.Kubeconfig,
		strings.TrimSpace("GOFLAGS=-trimpath "+os.Getenv("GOFLAGS")))
	page, err := os.ReadFile(filepath.Join(in.dir, filepath.FromSlash(installDoc)))
	if err != nil {
		t.Fatal(err)
	}
	if in.blocks, err = InstallBlocks(page); err != nil {
		t.Fatal(err)
	}
	restore, err := n.withoutHarnessGpuadmit(in.ctx, root)
	if restore != nil {
		t.Cleanup(func() {
			if err := restore(); err != nil {
				t.Errorf("put the harness's gpuadmit back: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatalf("take the harness's gpuadmit out: %v", err)
	}
	if in.before, err = n.Objects(in.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.cleanUp)
	t.Cleanup(in.checkSubstitutions)
	return in
}

// run runs an install block's commands in order and returns what each did.
// A command whose comment says "denied" must fail; any other must succeed.
func (in *install) run(block string) []commandResult {
	in.t.Helper()
	cmds, ok := in.blocks[block]
	if !ok {
		in.t.Fatalf("%s has no block marked <!-- install-test: %s -->", installDoc, block)
	}
	var results []commandResult
	for _, c := range cmds {
		r := in.shell(Substitute(in.subs, c))
		results = append(results, r)
		if denied := ExpectsDenial(c); denied && r.Err == nil {
			in.t.Fatalf("install block %s: %q was not refused, as its comment says it is", block, r.Cmd)
		} else if !denied && r.Err != nil {
			in.t.Fatalf("install block %s: %q: %v\n%s\n%s", block, r.Cmd, r.Err, lastLines(r.Stdout, 20), r.Stderr)
		}
	}
	return results
}

// shell runs one command in the checkout and logs it.
func (in *install) shell(cmd string) commandResult {
	timeout := 3 * time.Minute // kubectl rollout status waits for ever
	if strings.Contains(cmd, "make ") || strings.Contains(cmd, "go run ") {
		timeout = 10 * time.Minute // a cold build
	}
	r := runShell(in.ctx, in.dir, in.env, timeout, cmd)
	in.t.Logf("$ %s   (%s, %v)\n%s%s", r.Cmd, r.Took.Round(100*time.Millisecond), r.Err, lastLines(r.Stdout, 8), lastLines(r.Stderr, 8))
	return r
}

// checkSubstitutions fails a test whose substitutions docs/install.md no
// longer gave a command to change.
func (in *install) checkSubstitutions() {
	if in.t.Failed() {
		return // it may have stopped before the commands that use them
	}
	for _, s := range in.subs {
		if s.Used == 0 {
			in.t.Errorf("no command of %s matched %q, the change made because %s: the page changed under the test", installDoc, s.Old, s.Why)
		}
	}
}

// cleanUp runs the uninstall blocks, ignoring errors, when the test
// stopped before it did.
func (in *install) cleanUp() {
	if in.uninstalled {
		return
	}
	for _, b := range in.uninstall {
		for _, c := range in.blocks[b] {
			in.shell(Substitute(in.subs, c))
		}
	}
}

// exampleCreate matches docs/install.md's creation of an example pod.
var exampleCreate = regexp.MustCompile(`^kubectl create -f examples/pods/([a-z0-9-]+)\.yaml`)

// tryIt runs docs/install.md's try block, then creates the examples it did not,
// and checks each pod, the Deployment's pods, the denials, Events and
// `kubectl describe` against gpuadmit's offline decision.
func (in *install) tryIt() {
	t := in.t
	results := in.run("try")
	want := in.decideOffline()
	created := map[string]commandResult{}
	for _, r := range results {
		if m := exampleCreate.FindStringSubmatch(r.Cmd); m != nil {
			created[m[1]] = r
		}
	}
	if len(created) == 0 {
		t.Fatal("the try block of " + installDoc + " creates no example pod")
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if name == "deployment" {
			continue
		}
		if _, ok := created[name]; !ok {
			created[name] = in.shell("kubectl create -f examples/pods/" + name + ".yaml")
		}
	}
	for name, r := range created {
		in.checkCreated(name, r, want[name])
	}
	in.checkShown(results, want)
	in.checkDeployment(want["deployment"])
	in.checkEvents(created, want)
	in.checkDescribe(created, want)
}

// decideOffline is what `gpuadmit mutate -o json` decides for every
// example pod and examples/deployment.yaml against examples/nodes.yaml and
// examples/namespace.yaml, keyed by file name without .yaml.
func (in *install) decideOffline() map[string]offline.Output {
	in.t.Helper()
	out := map[string]offline.Output{}
	for _, f := range []string{"examples/pods", "examples/deployment.yaml"} {
		var buf strings.Builder
		err := offline.Mutate(in.ctx, offline.MutateOptions{
			PodFile: filepath.Join(in.dir, f), NodesFile: filepath.Join(in.dir, "examples/nodes.yaml"),
			NamespaceFile: filepath.Join(in.dir, "examples/namespace.yaml"), Output: "json", Notes: io.Discard,
		}, &buf)
		if err != nil {
			in.t.Fatalf("gpuadmit mutate -f %s: %v", f, err)
		}
		var outs []offline.Output
		if err := json.Unmarshal([]byte(buf.String()), &outs); err != nil {
			in.t.Fatal(err)
		}
		for _, o := range outs {
			out[strings.TrimSuffix(filepath.Base(o.Source), ".yaml")] = o
		}
	}
	return out
}

// checkCreated checks one example's `kubectl create`: an allowed pod is as
// gpuadmit decides it offline, with its warnings printed; a denied one is
// refused by gpuadmit's webhook with the offline message.
func (in *install) checkCreated(name string, r commandResult, want offline.Output) {
	t := in.t
	if !want.Allowed {
		if r.Err == nil {
			t.Errorf("example %s: created; gpuadmit mutate denies it: %s", name, want.Message)
			return
		}
		for _, s := range []string{`admission webhook "pods.mutate.gpuadmit.io" denied the request`, want.Message} {
			if !strings.Contains(r.Stderr, s) {
				t.Errorf("example %s: kubectl says %q; want it to say %q", name, r.Stderr, s)
			}
		}
		return
	}
	if r.Err != nil {
		t.Errorf("example %s: %v: %s; gpuadmit mutate allows it", name, r.Err, r.Stderr)
		return
	}
	for _, w := range want.Warnings {
		if !strings.Contains(r.Stderr, "Warning: "+w) {
			t.Errorf("example %s: kubectl printed %q; want the warning %q", name, r.Stderr, w)
		}
	}
	var p corev1.Pod
	in.kubectlJSON(&p, "-n", want.Namespace, "get", "pod", want.Name, "-o", "json")
	if d := podDiff(want.Pod, &p); d != "" {
		t.Errorf("example %s as the cluster has it differs from gpuadmit mutate's (-offline +live):\n%s", name, d)
	}
}

// checkShown checks the pods the try block's `kubectl get -o yaml` printed
// against gpuadmit's offline decisions: an example pod by its name, a pod
// of the Deployment by its label.
func (in *install) checkShown(results []commandResult, want map[string]offline.Output) {
	shown := 0
	for _, r := range results {
		if !strings.Contains(r.Cmd, "kubectl") || !strings.Contains(r.Cmd, " get ") || !strings.Contains(r.Cmd, "-o yaml") {
			continue
		}
		pods, err := yamlPods([]byte(r.Stdout))
		if err != nil {
			in.t.Errorf("%s: %v", r.Cmd, err)
			continue
		}
		for i := range pods {
			p := &pods[i]
			w, ok := want[p.Name]
			if !ok && p.Labels["app"] == want["deployment"].Name {
				w, ok = want["deployment"], true
			}
			if !ok {
				in.t.Errorf("%s shows pod %s, which is no example's", r.Cmd, p.Name)
				continue
			}
			shown++
			if d := podDiff(w.Pod, p); d != "" {
				in.t.Errorf("%s shows pod %s other than gpuadmit mutate decides it (-offline +shown):\n%s", r.Cmd, p.Name, d)
			}
		}
	}
	if shown == 0 {
		in.t.Error("the try block of " + installDoc + " shows no pod with kubectl get -o yaml")
	}
}

// checkDeployment checks that the Deployment's pods are rewritten as
// gpuadmit decides its template offline and the template is left as applied.
func (in *install) checkDeployment(want offline.Output) {
	t := in.t
	var pods corev1.PodList
	deadline := time.Now().Add(time.Minute)
	for {
		in.kubectlJSON(&pods, "-n", want.Namespace, "get", "pods", "-l", "app="+want.Name, "-o", "json")
		if len(pods.Items) == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if len(pods.Items) != 2 {
		t.Errorf("Deployment %s has %d pods after a minute; want its 2 replicas", want.Name, len(pods.Items))
	}
	for i := range pods.Items {
		if d := podDiff(want.Pod, &pods.Items[i]); d != "" {
			t.Errorf("pod %s of Deployment %s differs from gpuadmit mutate's (-offline +live):\n%s", pods.Items[i].Name, want.Name, d)
		}
	}
	var d struct {
		Spec struct{ Template corev1.PodTemplateSpec } `json:"spec"`
	}
	in.kubectlJSON(&d, "-n", want.Namespace, "get", "deployment", want.Name, "-o", "json")
	if _, ok := d.Spec.Template.Annotations["gpuadmit.io/decision"]; ok {
		t.Errorf("Deployment %s's template was rewritten: %v", want.Name, d.Spec.Template.Annotations)
	}
}

// checkEvents checks that `kubectl events`, the page's command, shows a
// GPUDenied Event naming each denied pod and a GPUWarning naming each pod
// admitted with a warning; Events are written after the answer, so it is
// asked again for up to a minute.
func (in *install) checkEvents(created map[string]commandResult, want map[string]offline.Output) {
	var missing []string
	deadline := time.Now().Add(time.Minute)
	for {
		r := runShell(in.ctx, in.dir, in.env, time.Minute, "kubectl events -n team-a")
		missing = nil
		for name := range created {
			w := want[name]
			reason := "GPUDenied"
			if w.Allowed {
				if len(w.Warnings) == 0 {
					continue
				}
				reason = "GPUWarning"
			}
			if !slices.ContainsFunc(strings.Split(r.Stdout, "\n"), func(l string) bool {
				return strings.Contains(l, reason) && strings.Contains(l, "Pod "+w.Name)
			}) {
				missing = append(missing, reason+" for pod "+w.Name)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			in.t.Errorf("kubectl events -n team-a lacks %s after a minute:\n%s", strings.Join(missing, ", "), r.Stdout)
			return
		}
		time.Sleep(2 * time.Second)
	}
}

// checkDescribe checks that `kubectl describe pod` of each admitted example
// shows gpuadmit's decision and the PriorityClass it chose.
func (in *install) checkDescribe(created map[string]commandResult, want map[string]offline.Output) {
	for name := range created {
		w := want[name]
		if !w.Allowed {
			continue
		}
		r := in.shell(fmt.Sprintf("kubectl -n %s describe pod %s", w.Namespace, w.Name))
		p := toPod(in.t, w.Pod)
		for _, s := range []string{"gpuadmit.io/decision:", "Priority Class Name:  " + p.Spec.PriorityClassName} {
			if !strings.Contains(r.Stdout, s) {
				in.t.Errorf("kubectl describe pod %s does not show %q:\n%s", w.Name, s, r.Stdout)
			}
		}
	}
}

// uninstallAll runs the uninstall blocks and checks that they leave no
// object the install made, and no gpuadmit process behind.
func (in *install) uninstallAll() {
	t := in.t
	for _, b := range in.uninstall {
		in.run(b)
	}
	in.uninstalled = true
	deadline := time.Now().Add(time.Minute)
	for _, port := range []string{"9443", "8080", "8081", machineControllerMetricsPort, machineControllerProbePort} {
		for {
			l, err := net.Listen("tcp", ":"+port)
			if err == nil {
				l.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("port %s still in use a minute after the uninstall: %v", port, err)
				break
			}
			time.Sleep(time.Second)
		}
	}
	after, err := in.n.Objects(in.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var left, gone []string
	for o := range after {
		if !in.before[o] {
			left = append(left, o)
		}
	}
	for o := range in.before {
		if !after[o] {
			gone = append(gone, o)
		}
	}
	slices.Sort(left)
	slices.Sort(gone)
	if len(left) > 0 || len(gone) > 0 {
		t.Errorf("the uninstall left %d objects the install made: %s\nand %d objects there before are gone: %s", len(left), left, len(gone), gone)
	}
}

// kubectlJSON runs kubectl with args and decodes its output into v.
func (in *install) kubectlJSON(v any, args ...string) {
	in.t.Helper()
	out, err := execOutput(in.kubectl, append([]string{"--kubeconfig", in.n.Cluster.Kubeconfig}, args...)...)
	if err != nil {
		in.t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		in.t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
}

func toPod(t *testing.T, m map[string]any) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// podDiff compares what gpuadmit decides in a pod: every container's
// resources, the nodeSelector, the affinity, the PriorityClass, and
// gpuadmit's labels and annotations (which the live pod may add to: the
// seal); the live pod may also carry tolerations the API server adds
// (DefaultTolerationSeconds). "" when they agree.
func podDiff(offlinePod map[string]any, live *corev1.Pod) string {
	want := &corev1.Pod{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(offlinePod, want); err != nil {
		return err.Error()
	}
	type view struct {
		Resources    map[string]corev1.ResourceRequirements
		NodeSelector map[string]string
		Affinity     *corev1.Affinity
		Priority     string
		Labels       map[string]string
		Annotations  map[string]string
		Tolerations  []corev1.Toleration
	}
	of := func(p *corev1.Pod, labels, annotations map[string]string, tol func(corev1.Toleration) bool) view {
		v := view{Resources: map[string]corev1.ResourceRequirements{}, NodeSelector: p.Spec.NodeSelector, Affinity: p.Spec.Affinity,
			Priority: p.Spec.PriorityClassName, Labels: map[string]string{}, Annotations: map[string]string{}}
		for _, c := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
			v.Resources[c.Name] = c.Resources
		}
		for k := range labels {
			v.Labels[k] = p.Labels[k]
		}
		for k := range annotations {
			v.Annotations[k] = p.Annotations[k]
		}
		for _, tl := range p.Spec.Tolerations {
			if tol(tl) {
				v.Tolerations = append(v.Tolerations, tl)
			}
		}
		return v
	}
	// gpuadmit.io/request records the pod's GPU request as the webhook got
	// it: the API server has filled in requests from limits by then, which
	// gpuadmit mutate, reading the file, does not.
	delete(want.Annotations, "gpuadmit.io/request")
	all := func(corev1.Toleration) bool { return true }
	w := of(want, want.Labels, want.Annotations, all)
	l := of(live, want.Labels, want.Annotations, func(tl corev1.Toleration) bool { return tl.TolerationSeconds == nil })
	return cmp.Diff(w, l)
}

// yamlPods decodes a Pod or a List of Pods, as `kubectl get -o yaml` prints them.
func yamlPods(b []byte) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := yaml.Unmarshal(b, &list); err == nil && len(list.Items) > 0 {
		return list.Items, nil
	}
	var p corev1.Pod
	if err := yaml.Unmarshal(b, &p); err != nil {
		return nil, err
	}
	return []corev1.Pod{p}, nil
}
