package inventory_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// realistic dresses a node as a kubelet reports it: images, conditions,
// addresses, capacity, managed fields and annotations of other tools.
func realistic(n corev1.Node) corev1.Node {
	n = *n.DeepCopy()
	n.UID, n.ResourceVersion = "2f1c", "4711"
	n.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}}
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations["node.alpha.kubernetes.io/ttl"] = "0"
	n.Annotations["volumes.kubernetes.io/controller-managed-attach-detach"] = "true"
	n.Spec.PodCIDR, n.Spec.ProviderID = "10.0.1.0/24", "aws:///us-east-1a/i-0abc"
	n.Status.Capacity = n.Status.Allocatable.DeepCopy()
	n.Status.Capacity[corev1.ResourceMemory] = resource.MustParse("2Ti")
	n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("190")
	n.Status.Images = []corev1.ContainerImage{{Names: []string{"nvcr.io/nvidia/pytorch:24.05-py3"}, SizeBytes: 9 << 30}}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.1.7"}}
	n.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: "v1.36.0"}
	n.Status.VolumesAttached = []corev1.AttachedVolume{{Name: "kubernetes.io/csi/ebs^vol-1", DevicePath: "/dev/xvdba"}}
	return n
}

func stripAll(t *testing.T, nodes []corev1.Node) []corev1.Node {
	t.Helper()
	out := make([]corev1.Node, len(nodes))
	for i := range nodes {
		got, err := inventory.StripNode(nodes[i].DeepCopy())
		if err != nil {
			t.Fatalf("StripNode(%s): %v", nodes[i].Name, err)
		}
		out[i] = *got.(*corev1.Node)
	}
	return out
}

// TestStripNodeKeepsWhatBuildReads: the node cache's transform loses nothing
// the inventory reads — Build on stripped nodes equals Build on whole ones,
// for the example cluster, agent readings, share offers and refused nodes.
func TestStripNodeKeepsWhatBuildReads(t *testing.T) {
	nodes := exampleNodes(t)
	agent := node("agent", map[string]string{inventory.LabelProduct: h100}, map[string]string{"nvidia.com/mig-1g.10gb": "7"})
	agent.Annotations = map[string]string{inventory.AnnotationGPUs: `[{"model":"H100-80GB","memoryMiB":81559,"healthy":true,
		"profiles":[{"name":"1g.10gb","computeSlices":1,"memorySlices":1,"memoryMiB":9984}]}]`}
	shared := withOffer(node("shared", map[string]string{inventory.LabelProduct: h100}, map[string]string{"gpuadmit.io/gpu-mem-10g": "16"}),
		`{"resource":"gpuadmit.io/gpu-mem-10g","unitMiB":10240,"sharesPerGPU":2}`)
	twice := node("twice", map[string]string{inventory.LabelProduct: h100}, map[string]string{"nvidia.com/gpu": "8", "gpuadmit.io/gpu-mem": "80"},
		taint("dedicated", "gpu", corev1.TaintEffectNoSchedule))
	cordoned := node("cordoned", map[string]string{inventory.LabelProduct: h100}, map[string]string{"nvidia.com/gpu": "8"},
		taint(corev1.TaintNodeUnreachable, "", corev1.TaintEffectNoSchedule))
	cordoned.Spec.Unschedulable = true
	nodes = append(nodes, agent, shared, twice, cordoned)
	for i := range nodes {
		nodes[i] = realistic(nodes[i])
	}
	want := inventory.Build(nodes, nil)
	got := inventory.Build(stripAll(t, nodes), nil)
	opts := cmp.Options{cmpopts.IgnoreUnexported(inventory.Inventory{}, inventory.Pool{}, inventory.Node{}), cmpopts.EquateEmpty()}
	if diff := cmp.Diff(want, got, opts); diff != "" {
		t.Errorf("Build on stripped nodes (-whole +stripped):\n%s", diff)
	}
	if len(want.Pools) < 5 || len(want.Refused) != 1 {
		t.Fatalf("the fixture builds %d pools and refuses %d nodes; the test means more pools and one refusal", len(want.Pools), len(want.Refused))
	}
}

// TestStripNodeDropsTheRest: exactly the name, UID, resourceVersion, labels,
// the agent's annotations, taints, spec.unschedulable and allocatable remain.
func TestStripNodeDropsTheRest(t *testing.T) {
	n := realistic(node("n", map[string]string{inventory.LabelProduct: h100}, map[string]string{"nvidia.com/gpu": "8"},
		taint("dedicated", "gpu", corev1.TaintEffectNoSchedule)))
	n.Spec.Unschedulable = true
	n.Annotations[inventory.AnnotationGPUs] = "[]"
	got := stripAll(t, []corev1.Node{n})[0]
	want := corev1.Node{}
	want.Name, want.UID, want.ResourceVersion, want.Labels = "n", "2f1c", "4711", n.Labels
	want.Annotations = map[string]string{inventory.AnnotationGPUs: "[]"}
	want.Spec.Taints, want.Spec.Unschedulable = n.Spec.Taints, true
	want.Status.Allocatable = n.Status.Allocatable
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stripped node (-want +got):\n%s", diff)
	}
	if tomb, _ := inventory.StripNode("tombstone"); tomb != "tombstone" {
		t.Errorf("a non-Node came back as %v", tomb)
	}
}
