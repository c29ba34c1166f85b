package offline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// MutateOptions are the inputs of one offline decision.
type MutateOptions struct {
	// PodFile is the pod to admit (YAML or JSON). Required.
	PodFile string
	// NodesFile is a YAML stream of Nodes the inventory is built from. Required.
	NodesFile string
	// NamespaceFile is the pod's Namespace; empty means one without labels.
	NamespaceFile string
	// PoliciesDir is the policy set; empty means the embedded default set.
	PoliciesDir string
	// Output is "yaml" (for people, the default) or "json" (one object).
	Output string
}

// Output is what `gpuadmit mutate -o json` prints: exactly one object.
type Output struct {
	Allowed     bool                  `json:"allowed"`
	Message     string                `json:"message"`
	Warnings    []string              `json:"warnings"`
	Patch       []jsonpatch.Operation `json:"patch"`
	Pod         map[string]any        `json:"pod"`
	Explanation string                `json:"explanation"`
}

// Mutate decides for the pod and writes the result to w. It returns an error
// only when it could not decide (unreadable input, a broken policy set); a
// denial is a decision and is written like any other.
func Mutate(ctx context.Context, opts MutateOptions, w io.Writer) error {
	if opts.Output != "" && opts.Output != "yaml" && opts.Output != "json" {
		return fmt.Errorf("output %q: use yaml or json", opts.Output)
	}
	req, inv, err := readInputs(opts)
	if err != nil {
		return err
	}
	engine := policy.NewEngine(policy.Options{})
	if _, err := engine.Load(ctx, policySource(opts.PoliciesDir)); err != nil {
		return err
	}
	res, err := mutate.NewMutator(engine, mutate.StaticInventory{Inv: inv}, mutate.MutatorOptions{}).Mutate(ctx, req)
	if err != nil {
		return fmt.Errorf("decide for %s: %w", opts.PodFile, err)
	}
	out, err := toOutput(res)
	if err != nil {
		return err
	}
	if opts.Output == "json" {
		return writeJSON(w, out)
	}
	return writeYAML(w, out, inv.Warnings)
}

func policySource(dir string) policy.Source {
	if dir == "" {
		return policy.Embedded()
	}
	return policy.Directory(dir)
}

func readInputs(opts MutateOptions) (mutate.Request, *inventory.Inventory, error) {
	var req mutate.Request
	if opts.PodFile == "" || opts.NodesFile == "" {
		return req, nil, fmt.Errorf("a pod file (-f) and a nodes file (--nodes) are required")
	}
	req.Pod = &corev1.Pod{}
	if err := readObject(opts.PodFile, "Pod", req.Pod); err != nil {
		return req, nil, err
	}
	if opts.NamespaceFile != "" {
		req.Namespace = &corev1.Namespace{}
		if err := readObject(opts.NamespaceFile, "Namespace", req.Namespace); err != nil {
			return req, nil, err
		}
		if req.Pod.Namespace == "" {
			req.Pod.Namespace = req.Namespace.Name
		}
	}
	f, err := os.Open(opts.NodesFile)
	if err != nil {
		return req, nil, fmt.Errorf("read nodes: %w", err)
	}
	defer f.Close()
	nodes, err := inventory.ReadNodes(f)
	if err != nil {
		return req, nil, fmt.Errorf("read nodes from %s: %w", opts.NodesFile, err)
	}
	return req, inventory.Build(nodes, allocator.Default()), nil
}

// readObject reads one object of the given kind, refusing fields the kind does not have.
func readObject(path, kind string, into any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", kind, err)
	}
	if n := documents(b); n > 1 {
		return fmt.Errorf("read %s from %s: the file holds %d documents; give one %s", kind, path, n, kind)
	}
	var meta struct {
		Kind string `json:"kind"`
	}
	if err := yaml.Unmarshal(b, &meta); err != nil {
		return fmt.Errorf("read %s from %s: %w", kind, path, err)
	}
	if meta.Kind != kind {
		return fmt.Errorf("read %s from %s: found kind %q", kind, path, meta.Kind)
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		return fmt.Errorf("read %s from %s: %w", kind, path, err)
	}
	return nil
}

// documents counts the non-empty YAML documents in b, decoding them as
// inventory.ReadNodes does; a comment-only document decodes to nothing.
func documents(b []byte) int {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	n := 0
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			return n
		}
		if len(doc) > 0 {
			n++
		}
	}
}

func toOutput(res mutate.Result) (Output, error) {
	pod, err := cleanObject(res.Pod)
	if err != nil {
		return Output{}, err
	}
	out := Output{Allowed: res.Allowed, Message: res.Message, Warnings: res.Warnings, Patch: res.Patch, Pod: pod, Explanation: res.Explanation}
	if out.Warnings == nil {
		out.Warnings = []string{}
	}
	if out.Patch == nil {
		out.Patch = []jsonpatch.Operation{}
	}
	return out, nil
}

// cleanObject drops the empty status and null timestamp a typed round trip adds.
func cleanObject(pod *corev1.Pod) (map[string]any, error) {
	b, err := json.Marshal(pod)
	if err != nil {
		return nil, fmt.Errorf("encode pod: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decode pod: %w", err)
	}
	if s, ok := m["status"].(map[string]any); ok && len(s) == 0 {
		delete(m, "status")
	}
	if md, ok := m["metadata"].(map[string]any); ok && md["creationTimestamp"] == nil {
		delete(md, "creationTimestamp")
	}
	return m, nil
}
