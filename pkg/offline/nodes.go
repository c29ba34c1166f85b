package offline

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	resourceapi "k8s.io/api/resource/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// readInventory builds the inventory from a YAML stream of Nodes and,
// where the cluster has DRA nodes, the ResourceSlices gpuadmit's driver
// publishes for them (kubectl get nodes,resourceslices -o yaml): with
// them the offline decision is the webhook's, alternatives on DRA pools
// included.
func readInventory(path string) (*inventory.Inventory, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read nodes: %w", err)
	}
	var nodes bytes.Buffer
	var slices []resourceapi.ResourceSlice
	if err := splitSlices(b, &nodes, &slices); err != nil {
		return nil, fmt.Errorf("read nodes from %s: %w", path, err)
	}
	list, err := inventory.ReadNodes(&nodes)
	if err != nil {
		return nil, fmt.Errorf("read nodes from %s: %w", path, err)
	}
	return inventory.BuildWithSlices(list, slices, allocator.Default()), nil
}

// splitSlices reads the stream's ResourceSlices (alone, in a List or a
// ResourceSliceList) into slices and writes every other document to out.
func splitSlices(b []byte, out *bytes.Buffer, slices *[]resourceapi.ResourceSlice) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for i := 0; ; i++ {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read document %d: %w", i, err)
		}
		kept, err := takeSlices(doc, slices)
		if err != nil {
			return fmt.Errorf("read document %d: %w", i, err)
		}
		if kept == nil {
			continue
		}
		raw, err := yaml.Marshal(kept)
		if err != nil {
			return fmt.Errorf("read document %d: %w", i, err)
		}
		out.WriteString("---\n")
		out.Write(raw)
	}
}

// takeSlices moves doc's ResourceSlices into slices and returns what is
// left of it (nil for nothing).
func takeSlices(doc map[string]any, slices *[]resourceapi.ResourceSlice) (map[string]any, error) {
	switch kind, _ := doc["kind"].(string); kind {
	case "ResourceSlice":
		var s resourceapi.ResourceSlice
		raw, err := yaml.Marshal(doc)
		if err == nil {
			err = yaml.Unmarshal(raw, &s)
		}
		if err != nil {
			return nil, fmt.Errorf("ResourceSlice: %w", err)
		}
		*slices = append(*slices, s)
		return nil, nil
	case "List", "ResourceSliceList":
		items, _ := doc["items"].([]any)
		var kept []any
		for i, item := range items {
			m, ok := item.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("items[%d]: not an object", i)
			}
			left, err := takeSlices(m, slices)
			if err != nil {
				return nil, fmt.Errorf("items[%d]: %w", i, err)
			}
			if left != nil {
				kept = append(kept, left)
			}
		}
		if len(kept) == 0 {
			return nil, nil
		}
		doc["items"] = kept
		return doc, nil
	}
	return doc, nil
}
