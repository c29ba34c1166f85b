package admission

import (
	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"

	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// nodeKind is one kind of GPU node: its GPU Feature Discovery labels and the
// GPU resources its device plugin advertises.
type nodeKind struct {
	prefix   string
	share    int // nodes in every block of 20
	cpu, mem string
	labels   map[string]string
	gpu      map[string]string
	taints   []corev1.Taint
}

var gpuTaint = corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}

// nodeKinds are six pools of every mode gpuadmit serves, in shares of every
// 20 nodes (of a thousand: 250, 150, 100, 100, 150, 250): H100 and H200 in MIG mixed strategy, A100 40GB cut into
// 1g.5gb (single strategy), T4s handing out memory shares, and whole L40S and
// A100 80GB GPUs.
var nodeKinds = []nodeKind{
	{prefix: "h100-mig", share: 5, cpu: "192", mem: "2Ti",
		labels: gfd("NVIDIA-H100-80GB-HBM3", "8", "81559", "hopper", "mixed"),
		gpu:    map[string]string{"nvidia.com/mig-1g.10gb": "16", "nvidia.com/mig-1g.20gb": "8", "nvidia.com/mig-3g.40gb": "4", "nvidia.com/mig-7g.80gb": "2"},
		taints: []corev1.Taint{gpuTaint}},
	{prefix: "h200-mig", share: 3, cpu: "192", mem: "3Ti",
		labels: gfd("NVIDIA-H200", "8", "143771", "hopper", "mixed"),
		gpu:    map[string]string{"nvidia.com/mig-1g.18gb": "28", "nvidia.com/mig-2g.35gb": "6", "nvidia.com/mig-3g.71gb": "4", "nvidia.com/mig-7g.141gb": "1"},
		taints: []corev1.Taint{gpuTaint}},
	{prefix: "a100-mig", share: 2, cpu: "128", mem: "1Ti",
		labels: gfd("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "56", "4864", "ampere", "single"),
		gpu:    map[string]string{"nvidia.com/gpu": "56"},
		taints: []corev1.Taint{gpuTaint}},
	{prefix: "t4-shared", share: 2, cpu: "48", mem: "192Gi",
		labels: gfd("Tesla-T4", "4", "15360", "turing", ""),
		gpu:    map[string]string{"gpuadmit.io/gpu-mem": "60"}},
	{prefix: "l40s", share: 3, cpu: "64", mem: "512Gi",
		labels: gfd("NVIDIA-L40S", "4", "46068", "ada-lovelace", ""),
		gpu:    map[string]string{"nvidia.com/gpu": "4"},
		taints: []corev1.Taint{gpuTaint}},
	{prefix: "a100-80g", share: 5, cpu: "128", mem: "2Ti",
		labels: gfd("NVIDIA-A100-SXM4-80GB", "8", "81920", "ampere", ""),
		gpu:    map[string]string{"nvidia.com/gpu": "8"},
		taints: []corev1.Taint{gpuTaint}},
}

// gfd returns the labels GPU Feature Discovery puts on a node.
func gfd(product, count, memory, family, strategy string) map[string]string {
	l := map[string]string{
		"nvidia.com/gpu.present":          "true",
		"nvidia.com/gpu.product":          product,
		"nvidia.com/gpu.count":            count,
		"nvidia.com/gpu.memory":           memory,
		"nvidia.com/gpu.family":           family,
		"nvidia.com/gpu.replicas":         "1",
		"nvidia.com/gpu.sharing-strategy": "none",
		"nvidia.com/cuda.driver.major":    "570",
		"nvidia.com/cuda.driver.minor":    "124",
		"nvidia.com/cuda.runtime.major":   "12",
		"nvidia.com/cuda.runtime.minor":   "8",
		"nvidia.com/gfd.timestamp":        "1767225600",
	}
	if strategy != "" {
		l["nvidia.com/mig.strategy"] = strategy
		l["nvidia.com/mig.capable"] = "true"
	}
	return l
}

// Nodes returns n fake GPU nodes, the kinds interleaved in their shares, with
// status (allocatable and capacity) filled in.
func Nodes(n int) []corev1.Node {
	nodes := make([]corev1.Node, 0, n)
	count := map[string]int{}
	for i := 0; len(nodes) < n; i++ {
		k := kindAt(i)
		nodes = append(nodes, k.node(count[k.prefix], i))
		count[k.prefix]++
	}
	advertiseAccounting(nodes)
	return nodes
}

// advertiseAccounting gives every GPU node the accounting capacity gpuadmit's
// agent advertises, which every GPU pod requests.
func advertiseAccounting(nodes []corev1.Node) {
	index := make(map[string]*corev1.Node, len(nodes))
	for i := range nodes {
		index[nodes[i].Name] = &nodes[i]
	}
	for _, p := range inventory.Build(nodes, allocator.Default()).Pools {
		for _, pn := range p.Nodes {
			n := index[pn.Name]
			for r, q := range p.NodeAccounting(pn) {
				n.Status.Allocatable[corev1.ResourceName(r)] = *resource.NewQuantity(q, resource.DecimalSI)
				n.Status.Capacity[corev1.ResourceName(r)] = *resource.NewQuantity(q, resource.DecimalSI)
			}
		}
	}
}

// kindAt spreads the kinds over every 20 nodes by their shares, so that a
// small cluster has every pool too.
func kindAt(i int) nodeKind {
	slot := i % 20
	for _, k := range nodeKinds {
		if slot < k.share {
			return k
		}
		slot -= k.share
	}
	return nodeKinds[0]
}

func (k nodeKind) node(idx, i int) corev1.Node {
	n := BaseNode(k.prefix, idx, i, k.cpu, k.mem)
	n.Labels["type"] = "kwok"
	for key, v := range k.labels {
		n.Labels[key] = v
	}
	n.Annotations = map[string]string{"kwok.x-k8s.io/node": "fake"}
	n.Spec.Taints = append([]corev1.Taint(nil), k.taints...)
	for r, q := range k.gpu {
		n.Status.Allocatable[corev1.ResourceName(r)] = resource.MustParse(q)
		n.Status.Capacity[corev1.ResourceName(r)] = resource.MustParse(q)
	}
	return n
}

// BaseNode is node idx of an instance type (prefix-0000, …) as the
// kubelet registers it: its well-known labels, the i-th node's zone of
// three, and cpu, mem and 110 pods allocatable, all of it capacity.
func BaseNode(prefix string, idx, i int, cpu, mem string) corev1.Node {
	name := fmt.Sprintf("%s-%04d", prefix, idx)
	n := corev1.Node{}
	n.Name = name
	n.Labels = map[string]string{
		"kubernetes.io/hostname":           name,
		"kubernetes.io/os":                 "linux",
		"kubernetes.io/arch":               "amd64",
		"node.kubernetes.io/instance-type": prefix,
		"topology.kubernetes.io/zone":      fmt.Sprintf("zone-%c", 'a'+i%3),
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(mem),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	n.Status.Allocatable, n.Status.Capacity = res, res.DeepCopy()
	return n
}
