package offline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// templatePaths says where each workload kind keeps its pod template, by
// apiVersion and kind: a kind of another group (Volcano's Job) is not one.
var templatePaths = map[string][]string{
	"apps/v1/Deployment":    {"spec", "template"},
	"apps/v1/StatefulSet":   {"spec", "template"},
	"apps/v1/DaemonSet":     {"spec", "template"},
	"apps/v1/ReplicaSet":    {"spec", "template"},
	"batch/v1/Job":          {"spec", "template"},
	"batch/v1/CronJob":      {"spec", "jobTemplate", "spec", "template"},
	"batch/v1beta1/CronJob": {"spec", "jobTemplate", "spec", "template"},
}

// object is one Pod or workload read from the input, with the pod gpuadmit
// decides for: the Pod itself, or a pod made of the workload's template.
type object struct {
	source    string         // file the object came from, "-" for stdin
	kind      string         // Pod, Deployment, …
	tmpl      []string       // path of the pod template; nil for a Pod
	name      string         // the object's name
	namespace string         // the object's namespace, or the default
	raw       map[string]any // the object as read, rewritten in place for output
	pod       *corev1.Pod
}

// readObjects reads every Pod and workload of path: a file, "-" (in), or a
// directory searched recursively for *.yaml, *.yml and *.json. Objects of
// other kinds are skipped with a note on notes; unreadable input is an error.
func readObjects(path string, in io.Reader, notes io.Writer, namespace string) ([]object, error) {
	if path == "-" {
		b, err := io.ReadAll(in)
		if err != nil {
			return nil, fmt.Errorf("read standard input: %w", err)
		}
		return parseObjects("-", b, notes, namespace)
	}
	files, err := inputFiles(path)
	if err != nil {
		return nil, err
	}
	var out []object
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", f, err)
		}
		objs, err := parseObjects(f, b, notes, namespace)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// inputFiles is path itself, or the manifests under the directory path, in lexical order.
func inputFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch filepath.Ext(p) {
		case ".yaml", ".yml", ".json":
			if !d.IsDir() {
				files = append(files, p)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read directory %s: %w", path, err)
	}
	return files, nil
}

// parseObjects decodes every document of b, expanding Lists.
func parseObjects(source string, b []byte, notes io.Writer, namespace string) ([]object, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []object
	for i := 1; ; i++ {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s, document %d: %w", source, i, err)
		}
		objs, err := fromDocument(source, doc, notes, namespace)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
}

// fromDocument turns one document into the objects gpuadmit decides for.
func fromDocument(source string, doc map[string]any, notes io.Writer, namespace string) ([]object, error) {
	if len(doc) == 0 {
		return nil, nil
	}
	kind, _ := doc["kind"].(string)
	if items, ok := doc["items"].([]any); ok && strings.HasSuffix(kind, "List") {
		var out []object
		for _, it := range items {
			item, _ := it.(map[string]any)
			objs, err := fromDocument(source, item, notes, namespace)
			if err != nil {
				return nil, err
			}
			out = append(out, objs...)
		}
		return out, nil
	}
	apiVersion, _ := doc["apiVersion"].(string)
	o := object{source: source, kind: kind, raw: doc, name: metaString(doc, "name"), namespace: metaString(doc, "namespace"),
		tmpl: templatePaths[apiVersion+"/"+kind]}
	if o.namespace == "" {
		o.namespace = namespace
	}
	isPod := apiVersion == "v1" && kind == "Pod"
	if !isPod && o.tmpl == nil {
		fmt.Fprintf(notes, "gpuadmit: skipping %s %s %q in %s: not a Pod or a workload with a pod template\n",
			apiVersion, kindOrNone(kind), o.name, source)
		return nil, nil
	}
	pod, err := o.podOf()
	if err != nil {
		return nil, fmt.Errorf("read %s %q from %s: %w", kind, o.name, source, err)
	}
	o.pod = pod
	return []object{o}, nil
}

// podOf decodes the Pod, or the pod the workload's template makes, refusing
// fields a Pod does not have. A template's pod is named as its controller
// would name it: generateName "<workload>-", no name.
func (o object) podOf() (*corev1.Pod, error) {
	if o.tmpl == nil {
		pod := &corev1.Pod{}
		err := strictDecode(o.raw, pod)
		if err == nil && pod.Namespace == "" {
			pod.Namespace = o.namespace
		}
		return pod, err
	}
	tmpl, ok := lookup(o.raw, o.tmpl)
	if !ok {
		return nil, fmt.Errorf("no pod template at %s", strings.Join(o.tmpl, "."))
	}
	var pt corev1.PodTemplateSpec
	if err := strictDecode(tmpl, &pt); err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(o.tmpl, "."), err)
	}
	pod := &corev1.Pod{ObjectMeta: pt.ObjectMeta, Spec: pt.Spec}
	pod.APIVersion, pod.Kind = "v1", "Pod"
	pod.Name, pod.GenerateName, pod.Namespace = "", o.name+"-", o.namespace
	return pod, nil
}

// setTemplate writes the decided pod's metadata and spec back into the
// workload's template (or replaces the Pod), for the YAML output.
func (o object) setTemplate(pod map[string]any) {
	if o.tmpl == nil {
		for k := range o.raw {
			delete(o.raw, k)
		}
		for k, v := range pod {
			o.raw[k] = v
		}
		return
	}
	tmpl, _ := lookup(o.raw, o.tmpl)
	md, _ := pod["metadata"].(map[string]any)
	delete(md, "name")
	delete(md, "generateName")
	delete(md, "namespace")
	tmpl["metadata"], tmpl["spec"] = md, pod["spec"]
}

// strictDecode decodes v into out through JSON, refusing unknown fields.
func strictDecode(v any, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(out)
}

// lookup follows path through nested maps.
func lookup(m map[string]any, path []string) (map[string]any, bool) {
	for _, k := range path {
		next, ok := m[k].(map[string]any)
		if !ok {
			return nil, false
		}
		m = next
	}
	return m, true
}

func metaString(doc map[string]any, key string) string {
	md, _ := doc["metadata"].(map[string]any)
	s, _ := md[key].(string)
	return s
}

func kindOrNone(kind string) string {
	if kind == "" {
		return "a document without kind"
	}
	return kind
}
