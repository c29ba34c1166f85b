package node

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A busybox pod runs a command in a real container under runc, scheduled
// by kube-scheduler onto the real node; its output comes back through the
// API server from the kubelet, and what the container saw is what the
// command printed: its own root filesystem and the ServiceAccount token the
// kubelet mounted.
func TestKubeletRunsAPod(t *testing.T) {
	n := requireNode(t)
	ctx := context.Background()
	pod := BusyboxPod("default", "runs-a-pod", "sh", "-c",
		`echo hello from $(hostname); cat /proc/1/cmdline | tr '\0' ' '; echo; ls /var/run/secrets/kubernetes.io/serviceaccount`)
	if _, err := n.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deletePod(t, n, pod) })
	got, err := n.WaitPod(ctx, "default", pod.Name, 2*time.Minute, Succeeded)
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.NodeName != n.Name {
		t.Errorf("pod ran on %q, want %q", got.Spec.NodeName, n.Name)
	}
	logs, err := n.Logs(ctx, "default", pod.Name, "main")
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	want := "hello from " + host + "\n" +
		"sh -c " + pod.Spec.Containers[0].Command[2] + " \n" +
		"ca.crt\nnamespace\ntoken\n"
	if diff := cmp.Diff(want, logs); diff != "" {
		t.Errorf("container output (-want +got):\n%s", diff)
	}
}

// Restarting the kubelet leaves a running pod running: the same container
// (ID and start time), never restarted, and the restarted kubelet reports
// it and serves its log.
func TestKubeletRestartKeepsPods(t *testing.T) {
	n := requireNode(t)
	ctx := context.Background()
	pod := BusyboxPod("default", "survives-restart", "sh", "-c", "echo started; exec sleep 3600")
	if _, err := n.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deletePod(t, n, pod) })
	before, err := n.WaitPod(ctx, "default", pod.Name, 2*time.Minute, Running)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.RestartKubelet(ctx); err != nil {
		t.Fatal(err)
	}
	// The restarted kubelet has synced the pod once it reports it Ready again.
	after, err := n.WaitPod(ctx, "default", pod.Name, time.Minute, func(p *corev1.Pod) bool {
		return Running(p) && p.Status.ContainerStatuses[0].Ready
	})
	if err != nil {
		t.Fatal(err)
	}
	b, a := before.Status.ContainerStatuses[0], after.Status.ContainerStatuses[0]
	if a.ContainerID != b.ContainerID || !a.State.Running.StartedAt.Equal(&b.State.Running.StartedAt) || a.RestartCount != 0 {
		t.Errorf("container after the restart: %s started %s, %d restarts; before: %s started %s",
			a.ContainerID, a.State.Running.StartedAt, a.RestartCount, b.ContainerID, b.State.Running.StartedAt)
	}
	// The restarted kubelet serves the log once it has learnt the pod again.
	var logs string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		if logs, err = n.Logs(ctx, "default", pod.Name, "main"); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if logs != "started\n" {
		t.Errorf("log after the restart = %q, want %q", logs, "started\n")
	}
	if out, err := n.Ctr("tasks", "ls"); err != nil || !strings.Contains(out, strings.TrimPrefix(b.ContainerID, "containerd://")) {
		t.Errorf("containerd's tasks lack %s: %v\n%s", b.ContainerID, err, out)
	}
}

// Exec through the API server reads a file the container wrote in its own
// root filesystem, and the container's view of the pod's identity.
func TestKubeletExecReadsAFile(t *testing.T) {
	n := requireNode(t)
	ctx := context.Background()
	pod := BusyboxPod("default", "exec-reads-a-file", "sh", "-c", "echo written-inside >/tmp/mark; exec sleep 3600")
	if _, err := n.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deletePod(t, n, pod) })
	if _, err := n.WaitPod(ctx, "default", pod.Name, 2*time.Minute, Running); err != nil {
		t.Fatal(err)
	}
	// The shell writes the file just after the container starts.
	var got string
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		if got, err = n.Exec(ctx, "default", pod.Name, "main", "cat", "/tmp/mark", "/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if want := "written-inside\ndefault"; got != want {
		t.Errorf("exec output = %q, want %q", got, want)
	}
}

// deletePod deletes the pod at once and waits until it is gone, so the
// next test starts on an empty node.
func deletePod(t *testing.T, n *Node, pod *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	if err := n.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); apierrors.IsNotFound(err) {
		return // gone already: evicted, or deleted by the test
	} else if err != nil {
		t.Errorf("delete pod %s: %v", pod.Name, err)
		return
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if _, err := n.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{}); err != nil {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Errorf("pod %s still there a minute after its deletion", pod.Name)
}
