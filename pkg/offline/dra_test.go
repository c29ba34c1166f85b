package offline_test

import (
	"strings"
	"testing"
)

// draCluster is what `kubectl get nodes,resourceslices -o yaml` prints for
// two DRA nodes of gpuadmit's driver: an H100 with one 1g.10gb MIG
// instance (pool h100) and a shareable A100 40GB (pool a100).
const draCluster = `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: h100-0
    labels: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3, gpuadmit.io/pool: h100, gpuadmit.io/node-mode: dra}
  status:
    allocatable: {gpuadmit.io/gpu-memory-mib: "1099511627776", gpuadmit.io/h100-80gb-mib: "81559"}
- apiVersion: v1
  kind: Node
  metadata:
    name: a100-0
    labels: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-40GB, gpuadmit.io/pool: a100, gpuadmit.io/node-mode: dra}
  status:
    allocatable: {gpuadmit.io/gpu-memory-mib: "1099511627776", gpuadmit.io/a100-40gb-mib: "40960"}
- apiVersion: resource.k8s.io/v1
  kind: ResourceSlice
  metadata: {name: h100-0-gpu.gpuadmit.io-abcde}
  spec:
    driver: gpu.gpuadmit.io
    nodeName: h100-0
    pool: {name: h100-0, generation: 1, resourceSliceCount: 1}
    devices:
    - name: mig-0-1
      attributes: {type: {string: mig}, model: {string: H100-80GB}, profile: {string: 1g.10gb}}
      capacity: {memory: {value: 9984Mi}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: a100-0-gpu.gpuadmit.io-fghij}
spec:
  driver: gpu.gpuadmit.io
  nodeName: a100-0
  pool: {name: a100-0, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    allowMultipleAllocations: true
    attributes: {type: {string: gpu}, model: {string: A100-40GB}}
    capacity: {memory: {value: 40Gi, requestPolicy: {validRange: {min: 1Gi, step: 1Gi}}}}
`

// TestMutateShowsDRAAlternatives: given the ResourceSlices beside the
// Nodes, the offline decision is the webhook's: an 8 GiB pod gets every
// alternative of the two DRA pools, in order, and the explanation names them.
func TestMutateShowsDRAAlternatives(t *testing.T) {
	dir := t.TempDir()
	nodes := writeFile(t, dir, "cluster.yaml", draCluster)
	pod := writeFile(t, dir, "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: team-a}\nspec:\n  containers:\n"+
		"  - {name: c, image: busybox, resources: {limits: {gpuadmit.io/gpu-memory: 8Gi}}}\n")
	o := opts(pod, "json")
	o.NodesFile = nodes
	out := mutateJSON(t, o)
	if out["allowed"] != true {
		t.Fatalf("allowed = %v: %v", out["allowed"], out["message"])
	}
	expl, _ := out["explanation"].(string)
	for _, s := range []string{"1) 1 MIG 1g.10gb slice(s) of an H100-80GB (9984 MiB) on pool h100", "2) a share of 8192 MiB of one A100-40GB on pool a100", "pinned to no pool"} {
		if !strings.Contains(expl, s) {
			t.Errorf("explanation %q does not say %q", expl, s)
		}
	}
}
