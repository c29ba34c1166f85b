package mutate

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// defaultEngine is the embedded default policy set, loaded once per test binary.
var defaultEngine = func() *policy.Engine {
	e := policy.NewEngine(policy.Options{})
	if _, err := e.Load(context.Background(), policy.Embedded()); err != nil {
		panic(err)
	}
	return e
}()

func exampleInventory(t testing.TB) *inventory.Inventory {
	t.Helper()
	return inventory.Build(readNodes(t, "../../examples/nodes.yaml"), allocator.Default())
}

// readNodes reads a YAML stream of Node objects, as `kubectl get nodes -o yaml` writes it.
func readNodes(t testing.TB, path string) []corev1.Node {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	nodes, err := inventory.ReadNodes(f)
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

func readYAML(t testing.TB, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// gpuNode is a Node with GFD labels and GPU allocatable, for one-pool inventories.
func gpuNode(name, product string, labels map[string]string, alloc map[string]int64, taints ...corev1.Taint) corev1.Node {
	l := map[string]string{inventory.LabelProduct: product}
	for k, v := range labels {
		l[k] = v
	}
	al := corev1.ResourceList{}
	for r, q := range alloc {
		al[corev1.ResourceName(r)] = *resource.NewQuantity(q, resource.DecimalSI)
	}
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status:     corev1.NodeStatus{Allocatable: al, Capacity: al},
	}
}

// mutator decides on nodes that advertise their accounting capacity, as
// gpuadmit's agent makes them do.
func mutator(nodes ...corev1.Node) *Mutator {
	for i := range nodes {
		nodes[i] = advertising(nodes[i])
	}
	return mutatorAsIs(nodes...)
}

// mutatorAsIs decides on nodes as they are.
func mutatorAsIs(nodes ...corev1.Node) *Mutator {
	return NewMutator(defaultEngine, StaticInventory{Inv: inventory.Build(nodes, allocator.Default())}, MutatorOptions{})
}

// pod builds a pod whose containers have the given GPU limits.
func pod(name string, limits ...map[string]string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
	for i, l := range limits {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: string(rune('a' + i)), Image: "busybox", Resources: corev1.ResourceRequirements{Limits: list(l)}})
	}
	return p
}

func list(m map[string]string) corev1.ResourceList {
	if m == nil {
		return nil
	}
	out := corev1.ResourceList{}
	for k, v := range m {
		out[corev1.ResourceName(k)] = resource.MustParse(v)
	}
	return out
}

func mustMutate(t *testing.T, m *Mutator, p *corev1.Pod) Result {
	t.Helper()
	res, err := m.Mutate(context.Background(), Request{Pod: p})
	if err != nil {
		t.Fatalf("Mutate(%s): %v", p.Name, err)
	}
	return res
}

// gpuResources is a container's GPU limits as strings, to compare.
// gpuResources are the container's resources but the accounting ones,
// which every GPU container carries (accountingResources has them).
func gpuResources(c corev1.Container) map[string]string {
	out := accountingResources(c)
	for k := range out {
		if inventory.IsAccountingResource(strings.TrimPrefix(k, "requests:")) {
			delete(out, k)
		}
	}
	return out
}

// accountingResources are all of the container's resources, limits and
// the requests that differ from them.
func accountingResources(c corev1.Container) map[string]string {
	out := map[string]string{}
	for k, q := range c.Resources.Limits {
		out[string(k)] = q.String()
	}
	for k, q := range c.Resources.Requests {
		if lim := c.Resources.Limits[k]; lim.Cmp(q) != 0 {
			out["requests:"+string(k)] = q.String()
		}
	}
	return out
}

func resourceQuantity(v int64) *resource.Quantity { return resource.NewQuantity(v, resource.DecimalSI) }

// patchOps are the JSON patch operations resp answers with: the handlers
// write the patch's bytes (write.MarshalPatch), not controller-runtime's Patches.
func patchOps(t testing.TB, resp admission.Response) []jsonpatch.Operation {
	t.Helper()
	if len(resp.Patches) > 0 {
		t.Fatalf("the response carries %d operations in Patches; the handlers answer with Patch", len(resp.Patches))
	}
	if len(resp.Patch) == 0 {
		return nil
	}
	if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("patch type %v, want JSONPatch", resp.PatchType)
	}
	var ops []jsonpatch.Operation
	if err := json.Unmarshal(resp.Patch, &ops); err != nil {
		t.Fatalf("decode the patch %s: %v", resp.Patch, err)
	}
	return ops
}
