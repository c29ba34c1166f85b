// Package podtest builds the pods the tests and benchmarks of mutate and
// its packages share.
package podtest

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// DeploymentLike is a copy of p with what a Deployment's pods carry
// (probes, 20 environment variables, volumes, a sidecar), none of which
// gpuadmit writes: the size of pod a patch is applied to in a cluster.
func DeploymentLike(p *corev1.Pod) *corev1.Pod {
	in := p.DeepCopy()
	c := &in.Spec.Containers[0]
	for i := range 20 {
		c.Env = append(c.Env, corev1.EnvVar{Name: fmt.Sprintf("SETTING_%d", i), Value: strings.Repeat("v", 40)})
	}
	c.Command = []string{"python", "-m", "server", "--port=8080", "--workers=4"}
	c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz"}}, PeriodSeconds: 10}
	c.ReadinessProbe = c.LivenessProbe.DeepCopy()
	for i := range 4 {
		v := fmt.Sprintf("data-%d", i)
		in.Spec.Volumes = append(in.Spec.Volumes, corev1.Volume{Name: v, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: v}}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: v, MountPath: "/etc/" + v})
	}
	in.Spec.Containers = append(in.Spec.Containers, corev1.Container{Name: "proxy", Image: "envoyproxy/envoy:v1.30", Args: []string{"-c", "/etc/envoy.yaml"}})
	return in
}
