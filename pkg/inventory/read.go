package inventory

import (
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// ReadNodes reads Node objects from a YAML or JSON stream: single Nodes,
// several "---" documents, or a List/NodeList as `kubectl get nodes -o yaml` prints.
func ReadNodes(r io.Reader) ([]corev1.Node, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var nodes []corev1.Node
	for i := 0; ; i++ {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nodes, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read document %d: %w", i, err)
		}
		got, err := nodesOf(doc)
		if err != nil {
			return nil, fmt.Errorf("read document %d: %w", i, err)
		}
		nodes = append(nodes, got...)
	}
}

func nodesOf(doc map[string]any) ([]corev1.Node, error) {
	switch kind, _ := doc["kind"].(string); kind {
	case "":
		if len(doc) == 0 {
			return nil, nil // an empty document between "---"
		}
		return nil, errors.New("object has no kind")
	case "Node":
		var n corev1.Node
		if err := convert(doc, &n); err != nil {
			return nil, err
		}
		return []corev1.Node{n}, nil
	case "List", "NodeList":
		items, _ := doc["items"].([]any)
		var nodes []corev1.Node
		for i, item := range items {
			m, ok := item.(map[string]any)
			if !ok || len(m) == 0 {
				return nil, fmt.Errorf("items[%d]: not an object", i)
			}
			got, err := nodesOf(m)
			if err != nil {
				return nil, fmt.Errorf("items[%d]: %w", i, err)
			}
			nodes = append(nodes, got...)
		}
		return nodes, nil
	default:
		return nil, fmt.Errorf("kind %s is not a Node", kind)
	}
}

func convert(doc map[string]any, into any) error {
	b, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	return yaml.Unmarshal(b, into)
}
