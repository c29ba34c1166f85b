package perf

import (
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/gpuadmit/gpuadmit/pkg/agent"
	"github.com/gpuadmit/gpuadmit/pkg/agent/dra"
	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// index stands for the harness's {{.Index}} in what the generator
// marshals; template replaces it once the text is written (see template).
const index = "@INDEX@"

// nodeKind is one kind of GPU node of the workload: eight GPUs of one
// model, served by gpuadmit's DRA driver, in an operator's named pool.
type nodeKind struct {
	// name starts the names of its nodes and names its templates.
	name string
	// param is the workload parameter that counts its nodes.
	param string
	// parts is its share of a workload's nodes, in quarters.
	parts int
	pool  string
	model string
	// mig lays MIG instances out on the first GPUs, one list of profiles
	// per GPU (MIG on); the other GPUs have MIG off and are shared.
	mig [][]string
}

var nodeKinds = []nodeKind{
	{name: "h100", param: "nodesH100", parts: 2, pool: "h100", model: "H100-80GB"},
	{name: "h100-mig", param: "nodesH100MIG", parts: 1, pool: "h100", model: "H100-80GB", mig: [][]string{
		{"1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb"},
		{"1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb"},
		{"3g.40gb", "3g.40gb"},
		{"3g.40gb", "3g.40gb"},
	}},
	{name: "h200", param: "nodesH200", parts: 1, pool: "h200", model: "H200-141GB"},
}

// nodeCounts splits n nodes over the kinds by their parts, the rest to
// the first kind.
func nodeCounts(n int) map[string]int {
	out := map[string]int{}
	left := n
	for _, k := range nodeKinds[1:] {
		out[k.param] = n * k.parts / 4
		left -= out[k.param]
	}
	out[nodeKinds[0].param] = left
	return out
}

// nodeName is the name of the kind's node of the harness's index.
func (k nodeKind) nodeName() string { return "gpuadmit-" + k.name + "-" + index }

// gpus are the node's GPUs as gpuadmit's agent discovers and annotates
// them: the catalog's sizes, MIG instances at the profile's placements in
// order.
func (k nodeKind) gpus() ([]allocator.NodeGPU, error) {
	m, ok := allocator.Default().Model(k.model)
	if !ok {
		return nil, fmt.Errorf("node kind %s: model %q is not in the catalog", k.name, k.model)
	}
	out := make([]allocator.NodeGPU, 8)
	for i := range out {
		g := allocator.NodeGPU{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", k.nodeName(), i), Product: m.Products[len(m.Products)-1],
			Model: m.Name, Known: true, MemoryMiB: m.MemoryMiB, MIGMode: allocator.MIGDisabled, Healthy: true}
		if i < len(k.mig) {
			in, err := instances(m, k.mig[i])
			if err != nil {
				return nil, fmt.Errorf("node kind %s, GPU %d: %w", k.name, i, err)
			}
			g.MIGMode, g.Profiles, g.Instances = allocator.MIGEnabled, m.Profiles, in
		}
		out[i] = g
	}
	return out, nil
}

// instances places profiles on one GPU of m: the k-th instance of a
// profile at its k-th placement.
func instances(m allocator.Model, profiles []string) ([]allocator.MIGInstance, error) {
	var out []allocator.MIGInstance
	used := map[string]int{}
	for _, name := range profiles {
		p, ok := m.Profile(name)
		if !ok || used[name] >= len(p.Placements) {
			return nil, fmt.Errorf("no placement left for MIG profile %q of %s", name, m.Name)
		}
		out = append(out, allocator.MIGInstance{ID: len(out) + 1, Profile: p.Name, Placement: p.Placements[used[name]], MemoryMiB: p.MemoryMiB})
		used[name]++
	}
	return out, nil
}

// node is the kind's Node: GPU Feature Discovery's labels, gpuadmit's
// node mode and pool, the agent's annotation of its GPUs and its DRA
// accounting capacity (agent.DRAAccounting), CPU and memory of a large
// GPU server.
func (k nodeKind) node(gpus []allocator.NodeGPU) (*corev1.Node, error) {
	raw, err := json.Marshal(gpus)
	if err != nil {
		return nil, fmt.Errorf("node kind %s: encode %s: %w", k.name, allocator.AnnotationGPUs, err)
	}
	m, _ := allocator.Default().Model(k.model)
	n := &corev1.Node{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: k.nodeName(), Labels: map[string]string{
			"nvidia.com/gpu.present":      "true",
			inventory.LabelProduct:        m.Products[0],
			inventory.LabelCount:          strconv.Itoa(len(gpus)),
			inventory.LabelMemory:         strconv.FormatInt(m.MemoryMiB, 10),
			inventory.LabelPool:           k.pool,
			allocator.LabelNodeMode:       allocator.NodeModeDRA,
			"kubernetes.io/os":            "linux",
			"kubernetes.io/arch":          "amd64",
			"topology.kubernetes.io/zone": "zone-a",
		}, Annotations: map[string]string{allocator.AnnotationGPUs: string(raw)}},
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("128"),
		corev1.ResourceMemory: resource.MustParse("1Ti"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	for name, v := range agent.DRAAccounting(gpus) {
		res[corev1.ResourceName(name)] = *resource.NewQuantity(v, resource.DecimalSI)
	}
	n.Status = corev1.NodeStatus{
		Capacity: res, Allocatable: res.DeepCopy(), Phase: corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
	}
	return n, nil
}

// slices are the ResourceSlices gpuadmit's driver publishes for the node
// (dra.Devices, dra.Resources), as the ResourceSlice controller writes
// them: generation 1, named by index, without the owner reference to the
// Node it adds.
func (k nodeKind) slices(gpus []allocator.NodeGPU) []resourceapi.ResourceSlice {
	uuids := map[dra.InstanceKey]string{}
	for _, g := range gpus {
		for _, in := range g.Instances {
			uuids[dra.InstanceKey{GPU: g.UUID, GI: in.ID}] = fmt.Sprintf("MIG-%s-%d", g.UUID, in.ID)
		}
	}
	node := k.nodeName()
	return sliceObjects(node, dra.Resources(node, dra.Devices(gpus, dra.DeviceOptions{MIGUUIDs: uuids})))
}

// sliceObjects are dra.Slices with their kind and version set, as the
// testdata's YAML holds them.
func sliceObjects(node string, res resourceslice.DriverResources) []resourceapi.ResourceSlice {
	out := dra.Slices(node, res)
	for i := range out {
		out[i].TypeMeta = metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceSlice"}
	}
	return out
}
