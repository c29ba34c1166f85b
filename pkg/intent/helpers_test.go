package intent

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// podOf builds a pod of app containers.
func podOf(ctrs ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{Containers: ctrs}}
}

// withInit adds init containers to p.
func withInit(p *corev1.Pod, ctrs ...corev1.Container) *corev1.Pod {
	p.Spec.InitContainers = ctrs
	return p
}

// annotated sets annotations given as "key=value" on p.
func annotated(p *corev1.Pod, kv ...string) *corev1.Pod {
	p.Annotations = pairs(kv)
	return p
}

// labeled sets labels given as "key=value" on p.
func labeled(p *corev1.Pod, kv ...string) *corev1.Pod {
	p.Labels = pairs(kv)
	return p
}

// ctr builds a container whose limits are given as "key=quantity".
func ctr(name string, limits ...string) corev1.Container {
	return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Limits: list(limits)}}
}

// sidecar makes c an init container that keeps running.
func sidecar(c corev1.Container) corev1.Container {
	always := corev1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

// requesting adds requests given as "key=quantity" to c.
func requesting(c corev1.Container, requests ...string) corev1.Container {
	c.Resources.Requests = list(requests)
	return c
}

func list(kv []string) corev1.ResourceList {
	if len(kv) == 0 {
		return nil
	}
	out := corev1.ResourceList{}
	for k, v := range pairs(kv) {
		out[corev1.ResourceName(k)] = resource.MustParse(v)
	}
	return out
}

func pairs(kv []string) map[string]string {
	out := map[string]string{}
	for _, s := range kv {
		k, v, _ := strings.Cut(s, "=")
		out[k] = v
	}
	return out
}
