package inventory

import (
	"encoding/json"
	"maps"
	"os"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// fixtureNodes are the example clusters, with the labels GFD and the
// kubelet really put on GPU nodes besides those Build reads, a MIG memory
// label and gpuadmit's node-mode label.
func fixtureNodes(t *testing.T) [][]corev1.Node {
	t.Helper()
	var clusters [][]corev1.Node
	for _, path := range []string{"../../examples/nodes.yaml", "../../examples/nodes-time-sliced.yaml"} {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		nodes, err := ReadNodes(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for i := range nodes {
			n := &nodes[i]
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			for k, v := range map[string]string{
				"nvidia.com/gfd.timestamp": "1764240000", "nvidia.com/cuda.driver.major": "580", "nvidia.com/gpu.family": "hopper",
				"nvidia.com/gpu.machine": "PowerEdge-XE9680", "kubernetes.io/hostname": n.Name, "topology.kubernetes.io/zone": "z1",
				"feature.node.kubernetes.io/pci-10de.present": "true", "nvidia.com/mig.capable": "true",
			} {
				n.Labels[k] = v
			}
			switch n.Name {
			case "h100-mig-0", "h100-mig-1":
				n.Labels["nvidia.com/mig-1g.10gb.memory"] = "9984"
			case "a100-80g-0":
				n.Labels[allocator.LabelNodeMode] = allocator.NodeModeDevicePlugin
			}
		}
		clusters = append(clusters, nodes)
	}
	return clusters
}

// outcome is everything Build makes of nodes, in a form that compares.
func outcome(t *testing.T, nodes []corev1.Node) string {
	t.Helper()
	inv := Build(nodes, nil)
	type nodeOut struct {
		Name        string
		Allocatable map[string]int64
		Down        []corev1.Taint
	}
	var pools []any
	for _, p := range inv.Pools {
		var ns []nodeOut
		for _, n := range p.Nodes {
			ns = append(ns, nodeOut{n.Name, n.Allocatable, n.Down})
		}
		pools = append(pools, map[string]any{"pool": p, "nodes": ns, "common": p.common, "offer": p.offer})
	}
	b, err := json.Marshal(map[string]any{"pools": pools, "warnings": inv.Warnings, "refused": inv.Refused})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBuildReadsOnlyTheListedLabels keeps builtFromLabels and Build's
// readers in step: changing or removing any other label of any example
// node changes nothing Build makes (else relevantChange would miss a
// change that matters), and each listed label changes something for some
// node (else the list holds a label nothing reads, and its churn would
// rebuild for nothing).
func TestBuildReadsOnlyTheListedLabels(t *testing.T) {
	mattered := map[string]bool{}
	for _, nodes := range fixtureNodes(t) {
		want := outcome(t, nodes)
		for i := range nodes {
			for _, key := range slices.Sorted(maps.Keys(nodes[i].Labels)) {
				old := nodes[i].Labels[key]
				for _, v := range []string{"", "1", "3", "x" + old} {
					changed := slices.Clone(nodes)
					changed[i].Labels = maps.Clone(nodes[i].Labels)
					if v == "" {
						delete(changed[i].Labels, key)
					} else {
						changed[i].Labels[key] = v
					}
					differs := outcome(t, changed) != want
					if differs && !builtFromLabel(key) {
						t.Errorf("node %s: label %s=%q changes what Build makes, but builtFromLabels does not list it", nodes[i].Name, key, v)
					}
					if differs {
						mattered[labelClass(key)] = true
					}
				}
			}
		}
	}
	for _, key := range append(slices.Clone(builtFromLabels), "nvidia.com/mig-<profile>.memory") {
		if !mattered[key] {
			t.Errorf("builtFromLabels lists %s, but changing it on no example node changed what Build makes", key)
		}
	}
}

// labelClass names the MIG memory labels as one.
func labelClass(key string) string {
	if builtFromLabel(key) && !slices.Contains(builtFromLabels, key) {
		return "nvidia.com/mig-<profile>.memory"
	}
	return key
}

// relevantChange must see every change the fixture test found to matter,
// and none of GFD's timestamp or the kubelet's heartbeat.
func TestRelevantChange(t *testing.T) {
	n := fixtureNodes(t)[0][0]
	tests := map[string]struct {
		change func(*corev1.Node)
		want   bool
	}{
		"gfd timestamp":       {func(n *corev1.Node) { n.Labels["nvidia.com/gfd.timestamp"] = "1764240060" }, false},
		"a label pods select": {func(n *corev1.Node) { n.Labels["team"] = "vision" }, false},
		"a condition":         {func(n *corev1.Node) { n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady}} }, false},
		"cpu allocatable":     {func(n *corev1.Node) { n.Status.Allocatable["cpu"] = n.Status.Allocatable["memory"] }, false},
		"another annotation":  {func(n *corev1.Node) { n.Annotations = map[string]string{"node.alpha.kubernetes.io/ttl": "0"} }, false},
		"product":             {func(n *corev1.Node) { n.Labels[LabelProduct] = "NVIDIA-H200" }, true},
		"MIG memory label":    {func(n *corev1.Node) { n.Labels["nvidia.com/mig-1g.10gb.memory"] = "1" }, true},
		"GPU allocatable":     {func(n *corev1.Node) { delete(n.Status.Allocatable, "nvidia.com/mig-1g.10gb") }, true},
		"accounting capacity": {func(n *corev1.Node) { delete(n.Status.Allocatable, ResourceMemoryMiB) }, true},
		"agent annotation":    {func(n *corev1.Node) { n.Annotations = map[string]string{AnnotationGPUs: "[]"} }, true},
		"a taint": {func(n *corev1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "k", Effect: "NoSchedule"})
		}, true},
		"cordon":               {func(n *corev1.Node) { n.Spec.Unschedulable = true }, true},
		"gpuadmit's node mode": {func(n *corev1.Node) { n.Labels[allocator.LabelNodeMode] = allocator.NodeModeDRA }, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			next := n.DeepCopy()
			tc.change(next)
			if got := relevantChange(&n, next); got != tc.want {
				t.Errorf("relevantChange = %v, want %v", got, tc.want)
			}
		})
	}
}
