package scale

import (
	"fmt"
	"maps"
	"path/filepath"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpuadmit/gpuadmit/bench/admission"
	"github.com/gpuadmit/gpuadmit/internal/fakegpu"
	"github.com/gpuadmit/gpuadmit/pkg/agent"
	"github.com/gpuadmit/gpuadmit/pkg/agent/dra"
)

// LabelTimestamp is the label GPU Feature Discovery rewrites on every GPU
// node once a minute, and the one the churn rewrites.
const LabelTimestamp = "nvidia.com/gfd.timestamp"

// gpuNode is one node of the fleet; a DRA node carries what its agent
// publishes.
type gpuNode struct {
	node corev1.Node
	// gpus are a DRA node's GPUs as the agent discovers them; nil on a
	// device-plugin node.
	gpus []agent.GPU
	// slices are a DRA node's ResourceSlices as the agent publishes them.
	slices []resourceapi.ResourceSlice
}

// draKind is one kind of DRA node: the NVML reading its fake GPUs answer
// as and GFD's labels for it.
type draKind struct {
	prefix, reading        string
	product, count, memory string
}

var draKinds = []draKind{
	{prefix: "dra-h100", reading: "h100-80gb-hbm3-raw.txt", product: "NVIDIA-H100-80GB-HBM3", count: "8", memory: "81559"},
	{prefix: "dra-h200", reading: "h200.txt", product: "NVIDIA-H200", count: "8", memory: "143771"},
}

// fleet makes n GPU nodes: every draEvery-th a DRA node (the kinds in
// turn), the others bench/admission's device-plugin nodes in their order.
// Fleets of different sizes agree on their common prefix, so a step adds
// the nodes past the last step's.
func fleet(root string, n, draEvery int) ([]gpuNode, error) {
	readings := make([]fakegpu.Reading, len(draKinds))
	for i, k := range draKinds {
		r, err := fakegpu.ReadReading(filepath.Join(root, "pkg/allocator/testdata/nvml", k.reading))
		if err != nil {
			return nil, err
		}
		readings[i] = r
	}
	draCount := 0
	if draEvery > 0 {
		draCount = n / draEvery
	}
	plugin := admission.Nodes(n - draCount)
	out := make([]gpuNode, 0, n)
	nextPlugin, nextDRA := 0, 0
	for i := range n {
		if draEvery > 0 && i%draEvery == draEvery-1 {
			k := nextDRA % len(draKinds)
			g, err := draNode(draKinds[k], readings[k], nextDRA/len(draKinds), i)
			if err != nil {
				return nil, err
			}
			out = append(out, g)
			nextDRA++
			continue
		}
		node := plugin[nextPlugin]
		maps.Copy(node.Labels, nfdLabels)
		out = append(out, gpuNode{node: node})
		nextPlugin++
	}
	return out, nil
}

// draNode is a node whose 8 GPUs gpuadmit's DRA driver serves: GFD's
// labels (GFD runs beside the driver), no GPU resource in allocatable
// (the driver publishes devices, not extended resources), and the slices
// the agent publishes for it.
func draNode(k draKind, r fakegpu.Reading, idx, i int) (gpuNode, error) {
	n := admission.BaseNode(k.prefix, idx, i, "192", "2Ti")
	name := n.Name
	maps.Copy(n.Labels, map[string]string{
		"nvidia.com/gpu.present":        "true",
		"nvidia.com/gpu.product":        k.product,
		"nvidia.com/gpu.count":          k.count,
		"nvidia.com/gpu.memory":         k.memory,
		"nvidia.com/gpu.family":         "hopper",
		"nvidia.com/gpu.replicas":       "1",
		"nvidia.com/cuda.driver.major":  "570",
		"nvidia.com/cuda.driver.minor":  "124",
		"nvidia.com/cuda.runtime.major": "12",
		"nvidia.com/cuda.runtime.minor": "8",
		LabelTimestamp:                  "1767225600",
	})
	maps.Copy(n.Labels, nfdLabels)
	devs := make(lister, 8)
	for g := range devs {
		devs[g] = r.Device(fmt.Sprintf("GPU-%s-%d", name, g))
	}
	gpus, err := agent.Discoverer{NVML: devs, Names: r.ProfileName}.Discover()
	if err != nil {
		return gpuNode{}, fmt.Errorf("discover GPUs of %s: %w", name, err)
	}
	return gpuNode{node: n, gpus: gpus, slices: dra.Slices(name, dra.Resources(name, dra.Devices(gpus, dra.DeviceOptions{})))}, nil
}

// lister is NVML's device list over fake GPUs.
type lister []*fakegpu.Device

func (l lister) DeviceGetCount() (int, nvml.Return) { return len(l), nvml.SUCCESS }

func (l lister) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	if i < 0 || i >= len(l) {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return l[i], nvml.SUCCESS
}

// nfdLabels are Node Feature Discovery's labels of a typical GPU server,
// 40 of them: with the kubelet's and GFD's about 60 labels a node, as the
// memory formula's nodes have.
var nfdLabels = func() map[string]string {
	l := map[string]string{}
	for _, f := range []string{"ADX", "AESNI", "AVX", "AVX2", "AVX512BW", "AVX512CD", "AVX512DQ", "AVX512F", "AVX512VL", "AVX512VNNI",
		"CMPXCHG8", "FMA3", "FXSR", "FXSROPT", "GFNI", "HYPERVISOR", "IBPB", "LAHF", "MOVBE", "OSXSAVE",
		"SHA", "SPEC_CTRL_SSBD", "STIBP", "SYSCALL", "SYSEE", "VAES", "VMX", "VPCLMULQDQ", "X87", "XGETBV1"} {
		l["feature.node.kubernetes.io/cpu-cpuid."+f] = "true"
	}
	for k, v := range map[string]string{
		"cpu-hardware_multithreading": "true", "cpu-model.family": "6", "cpu-model.id": "143", "cpu-model.vendor_id": "Intel",
		"kernel-version.full": "6.8.0-1015-nvidia", "kernel-version.major": "6", "kernel-version.minor": "8",
		"memory-numa": "true", "pci-10de.present": "true", "system-os_release.ID": "ubuntu",
	} {
		l["feature.node.kubernetes.io/"+k] = v
	}
	return l
}()
