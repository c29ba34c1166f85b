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
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/gpuadmit/gpuadmit/pkg/agent/dra"
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

// informerStore is a store as controller-runtime's cache makes each
// informer's: keyed by namespace/name, with the namespace index.
func informerStore() toolscache.Indexer {
	return toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
}

// listed is the store's objects as a cache List with UnsafeDisableDeepCopy
// hands them to the inventory: the structs copied into a list, their maps
// and strings shared.
func listed[T any](store toolscache.Indexer) []T {
	objs := store.List()
	out := make([]T, len(objs))
	for i, o := range objs {
		out[i] = *o.(*T)
	}
	return out
}

// BenchmarkHeapPerNode reports the heap per GPU node: its stripped Node in
// the informer's store, the list an inventory is built from, and its share
// of that inventory (b·nodes). "created" holds each node as it was built
// from; "updated" as after the node's next update that changes nothing the
// inventory reads (the kubelet's status, an irrelevant label): the cache
// then holds the new object, decoded anew, while the inventory (its nodes'
// labels) and the nodes' affinity objects keep the old one's maps until
// the next rebuild, as a Live does. During a rebuild the old inventory
// lives on beside the new one for a moment.
func BenchmarkHeapPerNode(b *testing.B) {
	for _, updated := range []bool{false, true} {
		b.Run(map[bool]string{false: "created", true: "updated"}[updated], func(b *testing.B) {
			const n = 2000
			var per float64
			for range b.N {
				per = heapOf(func() any {
					nodes := make([]*corev1.Node, n)
					for i := range nodes {
						nodes[i] = gfdNode(i)
					}
					return heldNodes(b, nodes, nil, nil, updated)
				}) / n
			}
			b.ReportMetric(per, "B/node")
		})
	}
}

// heldNodes holds nodes and slices as the webhook's caches and inventory
// do: stripped in informers' stores, an inventory built from their lists,
// and with updated, every node replaced in its store by a new decoding of
// itself after the build. It returns what keeps them alive.
func heldNodes(b *testing.B, nodes []*corev1.Node, slices []*resourceapi.ResourceSlice, strip toolscache.TransformFunc, updated bool) any {
	nodeStore, sliceStore := informerStore(), informerStore()
	for _, n := range nodes {
		obj, _ := inventory.StripNode(decodedNode(n))
		if err := nodeStore.Add(obj); err != nil {
			b.Fatal(err)
		}
	}
	for _, s := range slices {
		obj, _ := strip(s)
		if err := sliceStore.Add(obj); err != nil {
			b.Fatal(err)
		}
	}
	inv := inventory.BuildWithSlices(listed[corev1.Node](nodeStore), listed[resourceapi.ResourceSlice](sliceStore), nil)
	if want := len(nodes); len(inv.Pools) != 1 || len(inv.Pools[0].Nodes) != want {
		b.Fatalf("the nodes make pools %v, want one pool of %d nodes", inv.Pools, want)
	}
	if updated {
		for _, n := range nodes {
			obj, _ := inventory.StripNode(decodedNode(n))
			if err := nodeStore.Update(obj); err != nil {
				b.Fatal(err)
			}
		}
	}
	return []any{nodeStore, sliceStore, inv}
}

// draGFDNode is gfdNode i as a node of gpuadmit's DRA driver: the node-mode
// label, no MIG extended resources (the driver publishes devices), and the
// ResourceSlice the agent publishes for its 8 H100s, each in MIG with the
// same instances gfdNode advertises (two 1g.10gb, one 3g.40gb): 24 devices.
func draGFDNode(b testing.TB, i int) (*corev1.Node, []*resourceapi.ResourceSlice) {
	n := gfdNode(i)
	n.Labels[allocator.LabelNodeMode] = allocator.NodeModeDRA
	for r := range n.Status.Allocatable {
		if inventory.IsMIGResource(string(r)) {
			delete(n.Status.Allocatable, r)
		}
	}
	gpus := withMIG(b, catalogGPUs(b, "H100-80GB", 8, i), "1g.10gb", "1g.10gb", "3g.40gb")
	return n, agentSlices(n.Name, 1, dra.Devices(gpus, dra.DeviceOptions{MIGUUIDs: migUUIDsOf(gpus)}))
}

// BenchmarkHeapPerDRANode reports the heap per GPU node of gpuadmit's DRA
// driver as the webhook holds it: BenchmarkHeapPerNode's and its stripped
// ResourceSlice in that informer's store and list (b·nodes + s·DRA nodes),
// in a serving replica (RoleWebhook) and in the controller, which keeps
// each device's UUIDs for the usage report; "created" and "updated" as
// there.
func BenchmarkHeapPerDRANode(b *testing.B) {
	for _, role := range []Role{RoleWebhook, RoleController} {
		for _, updated := range []bool{false, true} {
			b.Run(string(role)+"/"+map[bool]string{false: "created", true: "updated"}[updated], func(b *testing.B) {
				const n = 2000
				var per float64
				for range b.N {
					strip := SliceTransform(role)
					per = heapOf(func() any {
						nodes := make([]*corev1.Node, n)
						var slices []*resourceapi.ResourceSlice
						for i := range nodes {
							var rs []*resourceapi.ResourceSlice
							nodes[i], rs = draGFDNode(b, i)
							slices = append(slices, rs...)
						}
						return heldNodes(b, nodes, slices, strip, updated)
					}) / n
				}
				b.ReportMetric(per, "B/node")
			})
		}
	}
}

// BenchmarkHeapPerGPUPod reports the heap per GPU pod: the stripped pod in
// the informer's store (its namespace index too) and its entry in free
// capacity's tally (c·pods).
func BenchmarkHeapPerGPUPod(b *testing.B) {
	const n = 5000
	var per float64
	for range b.N {
		capa := newCapacity(nil, logr.Discard())
		per = heapOf(func() any {
			store := informerStore()
			for i := range n {
				obj, _ := StripPod(decoded(realisticPod(i)))
				if err := store.Add(obj); err != nil {
					b.Fatal(err)
				}
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

// BenchmarkHeapPerDRANodeSlices reports the heap that one DRA node's
// ResourceSlices keep in the informer's store, as the agent publishes them
// for 8 GPUs (shared whole GPUs; MIG, seven 1g.10gb instances each), cached
// whole (managed fields stripped: the cache before SliceTransform) and
// stripped as a serving replica (RoleWebhook) and the controller strip them.
func BenchmarkHeapPerDRANodeSlices(b *testing.B) {
	const n = 1000
	kinds := map[string]func(i int) []resourceapi.Device{
		"shared-8xH100": func(i int) []resourceapi.Device {
			return dra.Devices(catalogGPUs(b, "H100-80GB", 8, i), dra.DeviceOptions{})
		},
		"mig-8xH100-7x1g.10gb": func(i int) []resourceapi.Device {
			gpus := withMIG(b, catalogGPUs(b, "H100-80GB", 8, i), "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb")
			return dra.Devices(gpus, dra.DeviceOptions{MIGUUIDs: migUUIDsOf(gpus)})
		},
	}
	for kind, devices := range kinds {
		for held, tr := range map[string]func() toolscache.TransformFunc{
			"whole":      cache.TransformStripManagedFields,
			"webhook":    func() toolscache.TransformFunc { return SliceTransform(RoleWebhook) },
			"controller": func() toolscache.TransformFunc { return SliceTransform(RoleController) },
		} {
			b.Run(kind+"/"+held, func(b *testing.B) {
				var per float64
				for range b.N {
					tr := tr() // a cache's transform, its shared maps new
					per = heapOf(func() any {
						store := informerStore()
						for i := range n {
							for _, s := range agentSlices(fmt.Sprintf("gpu-%05d", i), 1, devices(i)) {
								obj, err := tr(s)
								if err != nil {
									b.Fatal(err)
								}
								if err := store.Add(obj); err != nil {
									b.Fatal(err)
								}
							}
						}
						return store
					}) / n
				}
				b.ReportMetric(per, "B/node")
			})
		}
	}
}
