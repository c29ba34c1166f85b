package node

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// kubeletConfig is the node's KubeletConfiguration. What it needs here:
//   - failCgroupV1 false: v1.37 refuses cgroup v1 otherwise, and these
//     machines have v1; cgroupDriver cgroupfs, as there is no systemd;
//   - image GC only at a full disk and tiny eviction thresholds: imported
//     images cannot be pulled again, and a busy shared machine must not
//     evict the test's pods;
//   - the API on 127.0.0.1:10250 only, anonymous and always allowed: the
//     API server (logs, exec) reaches it there through the node's Hostname
//     address, and nothing off the machine can;
//   - container logs under the node's directory, not /var/log/pods.
func kubeletConfig(dir string) ([]byte, error) {
	return yaml.Marshal(map[string]any{
		"apiVersion":                  "kubelet.config.k8s.io/v1beta1",
		"kind":                        "KubeletConfiguration",
		"address":                     "127.0.0.1",
		"port":                        10250,
		"readOnlyPort":                0,
		"healthzBindAddress":          "127.0.0.1",
		"healthzPort":                 10248,
		"authentication":              map[string]any{"anonymous": map[string]any{"enabled": true}, "webhook": map[string]any{"enabled": false}},
		"authorization":               map[string]any{"mode": "AlwaysAllow"},
		"cgroupDriver":                "cgroupfs",
		"failCgroupV1":                false,
		"failSwapOn":                  false,
		"containerRuntimeEndpoint":    "unix://" + ContainerdSocket,
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"evictionHard":                map[string]string{"memory.available": "1Mi", "nodefs.available": "1%", "nodefs.inodesFree": "1%", "imagefs.available": "1%", "imagefs.inodesFree": "1%"},
		"podLogsDir":                  filepath.Join(dir, "pod-logs"),
		"nodeStatusUpdateFrequency":   "2s",
		"nodeStatusReportFrequency":   "10s",
		"syncFrequency":               "10s",
	})
}

func (n *Node) writeKubeletConfig() error {
	b, err := kubeletConfig(n.Dir)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(n.Dir, "kubelet.yaml"), b, 0o644); err != nil {
		return err
	}
	// The kubelet's identity: system:node:<name> in system:nodes, a client
	// certificate the cluster's CA signed, which the Node authorizer and
	// NodeRestriction admission key on.
	return n.Cluster.WriteKubeconfig(filepath.Join(n.Dir, "kubelet.kubeconfig"), "system:node:"+n.Name, "system:nodes")
}

func (n *Node) startKubelet() error {
	p, err := startProc(filepath.Join(n.LogDir, "kubelet.log"), nil, filepath.Join(n.bin, "kubelet"),
		"--config="+filepath.Join(n.Dir, "kubelet.yaml"),
		"--kubeconfig="+filepath.Join(n.Dir, "kubelet.kubeconfig"),
		"--hostname-override="+n.Name,
		"--root-dir="+KubeletDir,
		"--v=2")
	if err != nil {
		return err
	}
	n.kubelet = p
	return nil
}

// RestartKubelet stops the kubelet (SIGTERM) and starts it again with the
// same configuration; containers keep running under their shims. It
// returns once the restarted kubelet has reported the node Ready.
// The restarted kubelet learns its pods from the API server and the
// runtime a moment later: until then it answers 404 for their logs.
func (n *Node) RestartKubelet(ctx context.Context) error {
	n.kubelet.Stop()
	since := time.Now()
	if err := n.startKubelet(); err != nil {
		return err
	}
	return n.waitReady(ctx, since)
}

// RestartContainerd stops containerd and starts it again; containers keep
// running under their shims. It returns once containerd serves again.
func (n *Node) RestartContainerd(ctx context.Context) error {
	n.containerd.Stop()
	return n.startContainerd(ctx)
}

// waitReady waits until the kubelet started at since is healthy and has
// reported the node Ready (a heartbeat no older than since, at the API's
// one-second precision), and the not-ready taint is gone. No kubelet
// before it may still run, or its heartbeat would count.
func (n *Node) waitReady(ctx context.Context, since time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last string
	for {
		node, err := n.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		switch {
		case err != nil:
			last = err.Error()
		case !healthy():
			last = "kubelet's healthz not ok"
		case !ready(node, since):
			last = fmt.Sprintf("conditions %v", node.Status.Conditions)
		case len(node.Spec.Taints) > 0:
			last = fmt.Sprintf("taints %v", node.Spec.Taints)
		default:
			return nil
		}
		if n.kubelet.Exited() {
			return fmt.Errorf("kubelet exited (log %s)", filepath.Join(n.LogDir, "kubelet.log"))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s not ready: %s: %w", n.Name, last, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// healthy asks the kubelet's healthz endpoint.
func healthy() bool {
	resp, err := http.Get("http://127.0.0.1:10248/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func ready(node *corev1.Node, since time.Time) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue && !c.LastHeartbeatTime.Time.Before(since.Truncate(time.Second))
		}
	}
	return false
}
