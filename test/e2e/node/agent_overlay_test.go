package node

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/gpuadmit/gpuadmit/internal/fakegpu"
	"github.com/gpuadmit/gpuadmit/test/e2e/cluster"
)

// The test overlay changes only what the test node needs of each agent
// DaemonSet as shipped: the image, never pulled; the host's network and
// the API server's address; the driver root (flag and hostPath) and the
// hook path in the fake root, the fake NVML; each flag set once, the
// manifest's other flags kept. It needs no node, only kustomize.
func TestAgentTestOverlay(t *testing.T) {
	n := &Node{Cluster: &cluster.Cluster{Config: &rest.Config{Host: "https://127.0.0.1:36443"}}}
	gpus := &FakeGPUs{Root: fakegpu.Root{Dir: "/tmp/fake-root", HookPath: "/tmp/fake-root/usr/bin/nvidia-cdi-hook"}}
	for dir, name := range map[string]string{"deploy/agent": "gpuadmit-agent", "deploy/dra": "gpuadmit-agent-dra", "deploy/overlays/agent-mps": "gpuadmit-agent"} {
		t.Run(dir, func(t *testing.T) {
			objs, err := render(root, dir)
			if err != nil {
				if os.Getenv("GPUADMIT_REQUIRE_TOOLS") == "" {
					t.Skipf("SKIPPED, NOT TESTED: %v", err)
				}
				t.Fatal(err)
			}
			i := slices.IndexFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == "DaemonSet" && o.GetName() == name })
			if i < 0 {
				t.Fatalf("%s renders no %s", dir, name)
			}
			ds, err := n.testOverlay(objs[i], gpus, []string{"--resync=2s"})
			if err != nil {
				t.Fatal(err)
			}
			spec := ds.Spec.Template.Spec
			c := spec.Containers[0]
			if c.Image != AgentImage || c.ImagePullPolicy != corev1.PullNever || !spec.HostNetwork {
				t.Errorf("image %s (%s), hostNetwork %t; want %s, Never, true", c.Image, c.ImagePullPolicy, spec.HostNetwork, AgentImage)
			}
			env := map[string]string{}
			for _, e := range c.Env {
				env[e.Name] = e.Value
			}
			if env["KUBERNETES_SERVICE_HOST"] != "127.0.0.1" || env["KUBERNETES_SERVICE_PORT"] != "36443" {
				t.Errorf("API server address in the environment: %v", env)
			}
			flags := map[string]int{}
			values := map[string]string{}
			for _, a := range c.Args {
				k, v, _ := strings.Cut(a, "=")
				flags[k]++
				values[k] = v
			}
			for k, count := range flags {
				if count != 1 {
					t.Errorf("flag %s set %d times", k, count)
				}
			}
			want := map[string]string{
				"--driver-root": "/tmp/fake-root", "--container-driver-root": agentDriverRoot,
				"--nvidia-cdi-hook-path": gpus.HookPath, "--fake-nvml": "/driver-root/fakegpu/config.json",
				"--resync": "2s", "--cdi-dir": "/var/run/cdi",
			}
			got := map[string]string{}
			for k := range want {
				got[k] = values[k]
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("flags (-want +got):\n%s", diff)
			}
			var hostPath string
			for _, v := range spec.Volumes {
				if v.Name == "driver-root" && v.HostPath != nil {
					hostPath = v.HostPath.Path
				}
			}
			if hostPath != gpus.Dir {
				t.Errorf("driver-root volume's host path = %q, want %q", hostPath, gpus.Dir)
			}
		})
	}
}
