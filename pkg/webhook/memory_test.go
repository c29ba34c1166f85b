package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"runtime"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
	"github.com/gpuadmit/gpuadmit/policies"
)

// The coefficients of docs/scale.md's memory formula, measured as the
// heap (runtime.MemStats.HeapAlloc after a GC) that each added object
// keeps alive in the webhook: `go test ./pkg/webhook -run XXX -bench
// BenchmarkHeap -benchtime 3x`.

// heapOf is the heap that keep() keeps alive, measured around it.
func heapOf(keep func() any) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	kept := keep()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	return float64(after.HeapAlloc) - float64(before.HeapAlloc)
}

// gfdNode is GPU node i as GPU Feature Discovery, Node Feature Discovery,
// the kubelet and gpuadmit's agent leave it: about 60 labels, the agent's
// per-GPU annotation for 8 H100s, GPU and accounting allocatable.
func gfdNode(i int) *corev1.Node {
	n := &corev1.Node{}
	n.Name = fmt.Sprintf("gpu-%05d", i)
	n.UID = "6f1d2c3b-4a5e-4f60-8172-000000000000"
	n.ResourceVersion = "123456789"
	n.Labels = map[string]string{
		"kubernetes.io/hostname": n.Name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/instance-type": "p5.48xlarge",
		"node.kubernetes.io/instance-type": "p5.48xlarge", "topology.kubernetes.io/region": "us-east-1", "topology.kubernetes.io/zone": "us-east-1a",
		inventory.LabelProduct: "NVIDIA-H100-80GB-HBM3", inventory.LabelCount: "8", inventory.LabelMemory: "81559",
		inventory.LabelMIGStrategy: "mixed", inventory.LabelReplicas: "1", "nvidia.com/gfd.timestamp": "1764240000",
		"nvidia.com/cuda.driver.major": "580", "nvidia.com/cuda.driver.minor": "95", "nvidia.com/cuda.driver.rev": "05",
		"nvidia.com/cuda.runtime.major": "13", "nvidia.com/cuda.runtime.minor": "0", "nvidia.com/gpu.compute.major": "9",
		"nvidia.com/gpu.compute.minor": "0", "nvidia.com/gpu.family": "hopper", "nvidia.com/gpu.machine": "p5.48xlarge",
		"nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/mig.capable": "true", "nvidia.com/mps.capable": "false",
		"nvidia.com/vgpu.present": "false", "nvidia.com/gpu.present": "true", "nvidia.com/gpu.deploy.driver": "true",
		"nvidia.com/gpu.deploy.gpu-feature-discovery": "true", "nvidia.com/gpu.deploy.device-plugin": "true",
		"nvidia.com/gpu.deploy.dcgm-exporter": "true", "nvidia.com/gpu.deploy.container-toolkit": "true",
		"nvidia.com/mig-1g.10gb.count": "16", "nvidia.com/mig-1g.10gb.memory": "9984", "nvidia.com/mig-3g.40gb.count": "8",
		"nvidia.com/mig-3g.40gb.memory": "40448", "nvidia.com/mig.config": "all-balanced", "nvidia.com/mig.config.state": "success",
	}
	for _, f := range []string{"cpu-cpuid.AVX512F", "cpu-cpuid.AMXBF16", "cpu-hardware_multithreading", "cpu-model.family",
		"cpu-model.id", "cpu-model.vendor_id", "kernel-version.full", "kernel-version.major", "pci-10de.present",
		"pci-1d0f.present", "rdma.available", "rdma.capable", "system-os_release.ID", "system-os_release.VERSION_ID",
		"storage-nonrotationaldisk", "memory-numa", "network-sriov.capable", "kernel-config.NO_HZ", "cpu-pstate.status",
		"cpu-security.sgx.enabled"} {
		n.Labels["feature.node.kubernetes.io/"+f] = "true"
	}
	var gpus []string
	for g := range 8 {
		gpus = append(gpus, fmt.Sprintf(`{"index":%d,"uuid":"GPU-5f1c2a3b-4d5e-6f70-8192-a3b4c5d6e7f%d","model":"H100-80GB","memoryMiB":81559,`+
			`"profiles":[{"name":"1g.10gb","memoryMiB":9984,"computeSlices":1,"memorySlices":1},{"name":"3g.40gb","memoryMiB":40448,"computeSlices":3,"memorySlices":4}]}`, g, g))
	}
	n.Annotations = map[string]string{allocator.AnnotationGPUs: "[" + strings.Join(gpus, ",") + "]"}
	n.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}
	n.Status.Allocatable = corev1.ResourceList{}
	for r, q := range map[string]string{"cpu": "191450m", "memory": "2027958000Ki", "pods": "110", "ephemeral-storage": "1Ti",
		"hugepages-1Gi": "0", "hugepages-2Mi": "0", "vpc.amazonaws.com/efa": "32", "nvidia.com/mig-1g.10gb": "16",
		"nvidia.com/mig-3g.40gb": "8", allocator.ResourceMemoryMiB: "483328", "gpuadmit.io/h100-80gb-mib": "483328"} {
		n.Status.Allocatable[corev1.ResourceName(r)] = resource.MustParse(q)
	}
	return n
}

// BenchmarkHeapPerNode reports the heap per GPU node: its stripped Node in
// the informer's store and its share of one inventory (b·nodes). During a
// rebuild the old inventory lives on beside the new one for a moment.
func BenchmarkHeapPerNode(b *testing.B) {
	const n = 2000
	var per float64
	for range b.N {
		per = heapOf(func() any {
			store := make(map[string]any, n)
			nodes := make([]corev1.Node, 0, n)
			for i := range n {
				obj, _ := inventory.StripNode(decodedNode(gfdNode(i)))
				store[fmt.Sprint(i)] = obj
				nodes = append(nodes, *obj.(*corev1.Node))
			}
			return []any{store, inventory.Build(nodes, nil)}
		}) / n
	}
	b.ReportMetric(per, "B/node")
}

// BenchmarkHeapPerGPUPod reports the heap per GPU pod: the stripped pod in
// the informer's store and its entry in free capacity's tally (c·pods).
func BenchmarkHeapPerGPUPod(b *testing.B) {
	const n = 5000
	var per float64
	for range b.N {
		capa := newCapacity(nil, logr.Discard())
		per = heapOf(func() any {
			store := make(map[string]any, n)
			for i := range n {
				obj, _ := StripPod(decoded(realisticPod(i)))
				store[fmt.Sprint(i)] = obj
				capa.tally.set(obj.(*corev1.Pod))
			}
			return store
		}) / n
		runtime.KeepAlive(capa)
	}
	b.ReportMetric(per, "B/pod")
}

// BenchmarkHeapPerPolicyByte reports the heap of the active policy set per
// byte of its source (d·policy size): the embedded default set compiled.
func BenchmarkHeapPerPolicyByte(b *testing.B) {
	var size int64
	_ = fs.WalkDir(policies.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				size += info.Size()
			}
		}
		return nil
	})
	var per float64
	for range b.N {
		per = heapOf(func() any {
			e := policy.NewEngine(policy.Options{})
			if _, err := e.Load(context.Background(), policy.Embedded()); err != nil {
				b.Fatal(err)
			}
			return e
		}) / float64(size)
	}
	b.ReportMetric(float64(size), "policy-bytes")
	b.ReportMetric(per, "B/policy-byte")
}

// decodedNode is n as an informer holds it: decoded from JSON.
func decodedNode(n *corev1.Node) *corev1.Node {
	b, err := json.Marshal(n)
	if err != nil {
		panic(err)
	}
	out := &corev1.Node{}
	if err := json.Unmarshal(b, out); err != nil {
		panic(err)
	}
	return out
}
