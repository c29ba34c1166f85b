package deploy_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestNetworkPolicy: with networkPolicy.enabled the chart renders a policy
// that selects the webhook's pods, lets only the API server's addresses in
// on the webhook's port (and named peers on metrics), and lets the pods
// reach only the API server; without the addresses it refuses to render,
// and without enabled it renders none.
func TestNetworkPolicy(t *testing.T) {
	tl := findTools(t)
	if _, ok := tl.template(t)[key{Kind: "NetworkPolicy", Namespace: "gpuadmit-system", Name: "gpuadmit-webhook"}]; ok {
		t.Errorf("a NetworkPolicy is rendered without networkPolicy.enabled")
	}
	if _, err := tl.templateErr(t, "--set", "networkPolicy.enabled=true"); err == nil || !strings.Contains(err.Error(), "networkPolicy.apiServer.cidrs is required") {
		t.Errorf("enabled without the API server's addresses: error %v, want a refusal", err)
	}
	objs := tl.template(t, "--set", "networkPolicy.enabled=true", "--set", "networkPolicy.apiServer.cidrs={10.0.0.10/32,10.0.0.11/32}",
		"--set", "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.name=monitoring")
	np := get[*networkingv1.NetworkPolicy](t, objs, "NetworkPolicy", "gpuadmit-system", "gpuadmit-webhook")
	d := get[*appsv1.Deployment](t, objs, "Deployment", "gpuadmit-system", "gpuadmit-webhook")

	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("pod selector %v does not select the webhook's pods %v", np.Spec.PodSelector, d.Spec.Template.Labels)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}) {
		t.Errorf("policy types %v, want ingress and egress", np.Spec.PolicyTypes)
	}
	apiServer := []networkingv1.NetworkPolicyPeer{
		{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.10/32"}}, {IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.11/32"}},
	}
	tcp := func(port int) []networkingv1.NetworkPolicyPort {
		p := intstr.FromInt32(int32(port))
		proto := corev1.ProtocolTCP
		return []networkingv1.NetworkPolicyPort{{Protocol: &proto, Port: &p}}
	}
	webhookPort := 0
	for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
		if p.Name == "webhook" {
			webhookPort = int(p.ContainerPort)
		}
	}
	wantIngress := []networkingv1.NetworkPolicyIngressRule{
		{From: apiServer, Ports: tcp(webhookPort)},
		{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"name": "monitoring"}}}}, Ports: tcp(8080)},
	}
	if diff := cmp.Diff(wantIngress, np.Spec.Ingress); diff != "" {
		t.Errorf("ingress (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]networkingv1.NetworkPolicyEgressRule{{To: apiServer, Ports: tcp(6443)}}, np.Spec.Egress); diff != "" {
		t.Errorf("egress (-want +got):\n%s", diff)
	}
}
