package inventory_test

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

const nodeA = `apiVersion: v1
kind: Node
metadata:
  name: a
  labels: {nvidia.com/gpu.product: Tesla-T4}
status:
  allocatable: {gpuadmit.io/gpu-mem: "15"}
`

const nodeB = `apiVersion: v1
kind: Node
metadata: {name: b}
`

func TestReadNodes(t *testing.T) {
	example, err := os.ReadFile("../../examples/nodes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		in   string
		want []string
	}{
		"a List, as the examples file": {
			in:   string(example),
			want: []string{"h100-mig-0", "h100-mig-1", "h200-mig-0", "a100-single-0", "t4-shared-0", "a100-80g-0", "cpu-0"},
		},
		"a NodeList": {
			in:   "apiVersion: v1\nkind: NodeList\nitems:\n- {kind: Node, metadata: {name: a}}\n- {kind: Node, metadata: {name: b}}\n",
			want: []string{"a", "b"},
		},
		"documents with an empty one between": {
			in:   "---\n" + nodeA + "---\n---\n# only a comment\n---\n" + nodeB,
			want: []string{"a", "b"},
		},
		"a single Node":  {in: nodeA, want: []string{"a"}},
		"a JSON Node":    {in: `{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "j"}}`, want: []string{"j"}},
		"a JSON List":    {in: `{"kind": "List", "items": [{"kind": "Node", "metadata": {"name": "j"}}]}`, want: []string{"j"}},
		"an empty input": {in: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			nodes, err := inventory.ReadNodes(strings.NewReader(tc.in))
			if err != nil {
				t.Fatalf("ReadNodes: %v", err)
			}
			var got []string
			for _, n := range nodes {
				got = append(got, n.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("node names (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadNodesKeepsWhatBuildReads(t *testing.T) {
	nodes, err := inventory.ReadNodes(strings.NewReader(nodeA))
	if err != nil {
		t.Fatalf("ReadNodes: %v", err)
	}
	if len(nodes) != 1 {
		t.Fatalf("read %d nodes, want 1", len(nodes))
	}
	n := nodes[0]
	if got := n.Labels[inventory.LabelProduct]; got != "Tesla-T4" {
		t.Errorf("product label = %q, want Tesla-T4", got)
	}
	if q := n.Status.Allocatable["gpuadmit.io/gpu-mem"]; q.Value() != 15 {
		t.Errorf("allocatable gpuadmit.io/gpu-mem = %s, want 15", q.String())
	}
}

func TestReadNodesErrors(t *testing.T) {
	tests := map[string]struct {
		in   string
		want []string // the error names each
	}{
		"a Pod after a Node":                {in: nodeA + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\n", want: []string{"document 1", "Pod"}},
		"a Pod inside a List":               {in: "kind: List\nitems:\n- {kind: Node, metadata: {name: a}}\n- {kind: Pod}\n", want: []string{"document 0", "items[1]", "Pod"}},
		"a List item that is not an object": {in: "kind: List\nitems: [42]\n", want: []string{"document 0", "items[0]", "not an object"}},
		"an object without a kind":          {in: "metadata: {name: a}\n", want: []string{"document 0", "no kind"}},
		"invalid YAML":                      {in: "kind: Node\nmetadata: {name: [a\n", want: []string{"document 0"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			nodes, err := inventory.ReadNodes(strings.NewReader(tc.in))
			if err == nil {
				t.Fatalf("ReadNodes = %d nodes, want an error", len(nodes))
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}
