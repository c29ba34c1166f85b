package node

import (
	"bytes"
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/utils/ptr"
)

// BusyboxPod is a pod of one busybox container running command, on the
// host's network (the node has no pod network) with the imported image
// only, never restarted.
func BusyboxPod(namespace, name string, command ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{
			HostNetwork:                   true,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           BusyboxImage,
				ImagePullPolicy: corev1.PullNever,
				Command:         command,
			}},
		},
	}
}

// WaitPod polls the pod until done says it is, and returns it; it fails
// early when the pod failed and done did not accept that.
func (n *Node) WaitPod(ctx context.Context, namespace, name string, timeout time.Duration, done func(*corev1.Pod) bool) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		pod, err := n.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err != nil:
			last = err.Error()
		case done(pod):
			return pod, nil
		case pod.Status.Phase == corev1.PodFailed:
			return pod, fmt.Errorf("pod %s/%s failed: %s", namespace, name, podState(pod))
		default:
			last = podState(pod)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("pod %s/%s: %s: %w", namespace, name, last, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Running says a pod runs: every container started and running.
func Running(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Running == nil {
			return false
		}
	}
	return true
}

// Succeeded says a pod's containers all exited 0.
func Succeeded(pod *corev1.Pod) bool { return pod.Status.Phase == corev1.PodSucceeded }

func podState(pod *corev1.Pod) string {
	s := fmt.Sprintf("phase %s on %q", pod.Status.Phase, pod.Spec.NodeName)
	for _, c := range pod.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			s += fmt.Sprintf("; %s: %s", c.Type, c.Message)
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		switch {
		case cs.State.Waiting != nil:
			s += fmt.Sprintf("; %s waiting: %s %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
		case cs.State.Terminated != nil:
			s += fmt.Sprintf("; %s exited %d: %s", cs.Name, cs.State.Terminated.ExitCode, cs.State.Terminated.Reason)
		}
	}
	return s
}

// Logs reads a container's log through the API server, which asks the
// kubelet (its containerLogs endpoint) for it: what `kubectl logs` does.
func (n *Node) Logs(ctx context.Context, namespace, pod, container string) (string, error) {
	b, err := n.Client.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("logs of %s/%s/%s: %w", namespace, pod, container, err)
	}
	return string(b), nil
}

// WaitServiceAccount waits for the namespace's default ServiceAccount and
// its kube-root-ca.crt, which the controller-manager creates: until then
// ServiceAccount admission refuses pods there.
func (n *Node) WaitServiceAccount(ctx context.Context, namespace string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		_, err := n.Client.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			_, err = n.Client.CoreV1().ConfigMaps(namespace).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		}
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("default ServiceAccount of %s: %w", namespace, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Exec runs command in a running container through the API server and the
// kubelet, as `kubectl exec` does (WebSocket), and returns its standard
// output; an error carries its standard error. It reads what a container
// sees: files, devices, its environment.
func (n *Node) Exec(ctx context.Context, namespace, pod, container string, command ...string) (string, error) {
	req := n.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: command, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	exec, err := remotecommand.NewWebSocketExecutor(n.Cluster.Config, "GET", req.URL().String())
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	if err := exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
		return stdout.String(), fmt.Errorf("exec %v in %s/%s/%s: %w: %s", command, namespace, pod, container, err, stderr.String())
	}
	return stdout.String(), nil
}
