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

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
	"github.com/gpuadmit/gpuadmit/pkg/quota"
)

// MutateOptions are the inputs of one offline run.
type MutateOptions struct {
	// PodFile is what to decide for: a file, "-" for standard input, or a
	// directory searched recursively for *.yaml, *.yml and *.json. Each file
	// may hold several documents and Lists; Pods, Deployments, StatefulSets,
	// DaemonSets, ReplicaSets, Jobs and CronJobs are decided, other kinds are
	// skipped with a note. Required.
	PodFile string
	// NodesFile is a YAML stream of Nodes the inventory is built from, and
	// of the ResourceSlices of gpuadmit's DRA driver where it has DRA
	// nodes (kubectl get nodes,resourceslices -o yaml). Required.
	NodesFile string
	// NamespaceFile is the Namespace of objects that name none, and its labels
	// apply to objects in it; empty means "default", without labels.
	NamespaceFile string
	// PoliciesDir is the policy set; empty means the embedded default set.
	PoliciesDir string
	// Output is "yaml" (for people, the default) or "json" (an array of Results).
	Output string
	// Stdin is read for PodFile "-"; nil means os.Stdin.
	Stdin io.Reader
	// Notes receives a line for each document skipped; nil means os.Stderr.
	Notes io.Writer
}

// Output is one element of what `gpuadmit mutate -o json` prints, a JSON
// array with one Output per Pod or pod template, in input order.
type Output struct {
	// Kind, Namespace and Name are the object's; Source is the file it came from ("-" for stdin).
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Source    string `json:"source"`
	// Allowed, Message and Warnings are the webhook's answer for the object's pods.
	Allowed  bool     `json:"allowed"`
	Message  string   `json:"message"`
	Warnings []string `json:"warnings"`
	// Patch is the JSON patch against the pod (for a workload, the pod its
	// template makes: metadata and spec of spec.template as a Pod).
	Patch []jsonpatch.Operation `json:"patch"`
	// Pod is that pod as gpuadmit admits it (as it arrived when denied).
	Pod map[string]any `json:"pod"`
	// Explanation is the paragraph a person can follow.
	Explanation string `json:"explanation"`
}

// Mutate decides for every Pod and pod template of opts.PodFile and writes
// the results to w. It returns an error only when it could not decide
// (unreadable input, a broken policy set); a denial is a decision and is
// written like any other.
func Mutate(ctx context.Context, opts MutateOptions, w io.Writer) error {
	if opts.Output != "" && opts.Output != "yaml" && opts.Output != "json" {
		return fmt.Errorf("output %q: use yaml or json", opts.Output)
	}
	objs, ns, inv, err := readInputs(opts)
	if err != nil {
		return err
	}
	engine := policy.NewEngine(policy.Options{Validate: quota.ValidSet}) // as the webhook loads a set
	if _, err := engine.Load(ctx, policySource(opts.PoliciesDir)); err != nil {
		return err
	}
	m := mutate.NewMutator(engine, mutate.StaticInventory{Inv: inv}, mutate.MutatorOptions{})
	outs := make([]Output, 0, len(objs))
	for _, o := range objs {
		out, err := decide(ctx, m, o, ns)
		if err != nil {
			return err
		}
		outs = append(outs, out)
	}
	if opts.Output == "json" {
		return writeJSON(w, outs)
	}
	return writeYAML(w, objs, outs, inv.Warnings)
}

// decide runs the webhook's decision for the object's pod.
func decide(ctx context.Context, m *mutate.Mutator, o object, ns *corev1.Namespace) (Output, error) {
	req := mutate.Request{Pod: o.pod}
	if ns != nil && ns.Name == o.pod.Namespace {
		req.Namespace = ns
	}
	res, err := m.Mutate(ctx, req)
	if err != nil {
		return Output{}, fmt.Errorf("decide for %s %q in %s: %w", o.kind, o.name, o.source, err)
	}
	out, err := toOutput(res)
	out.Kind, out.Namespace, out.Name, out.Source = o.kind, o.namespace, o.name, o.source
	return out, err
}

func policySource(dir string) policy.Source {
	if dir == "" {
		return policy.Embedded()
	}
	return policy.Directory(dir)
}

func readInputs(opts MutateOptions) ([]object, *corev1.Namespace, *inventory.Inventory, error) {
	if opts.PodFile == "" || opts.NodesFile == "" {
		return nil, nil, nil, fmt.Errorf("a file, directory or - (-f) and a nodes file (--nodes) are required")
	}
	var ns *corev1.Namespace
	defaultNS := "default"
	if opts.NamespaceFile != "" {
		ns = &corev1.Namespace{}
		if err := readObject(opts.NamespaceFile, "Namespace", ns); err != nil {
			return nil, nil, nil, err
		}
		defaultNS = ns.Name
	}
	in, notes := opts.Stdin, opts.Notes
	if in == nil {
		in = os.Stdin
	}
	if notes == nil {
		notes = os.Stderr
	}
	objs, err := readObjects(opts.PodFile, in, notes, defaultNS)
	if err != nil {
		return nil, nil, nil, err
	}
	inv, err := readInventory(opts.NodesFile)
	return objs, ns, inv, err
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
