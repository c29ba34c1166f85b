package offline

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"
)

func writeJSON(w io.Writer, outs []Output) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(outs)
}

// writeYAML prints, object by object, the verdict and explanation as comments
// above the rewritten object (the Pod, or the workload with its template
// rewritten), so the output stays a stream a person can read and kubectl can
// apply. A denied object is printed as comments only.
func writeYAML(w io.Writer, objs []object, outs []Output, inventoryWarnings []string) error {
	var b strings.Builder
	for i, out := range outs {
		if i > 0 {
			b.WriteString("---\n")
		}
		verdict := "allowed"
		if !out.Allowed {
			verdict = "denied"
		}
		fmt.Fprintf(&b, "# gpuadmit: %s (%d patch operations)\n", verdict, len(out.Patch))
		if len(outs) > 1 || out.Kind != "Pod" {
			fmt.Fprintf(&b, "# %s %s/%s from %s\n", out.Kind, out.Namespace, out.Name, out.Source)
		}
		comment(&b, out.Explanation) // it ends with the warnings
		for _, warn := range inventoryWarnings {
			comment(&b, "inventory: "+warn)
		}
		if !out.Allowed {
			continue
		}
		objs[i].setTemplate(out.Pod)
		y, err := yaml.Marshal(objs[i].raw)
		if err != nil {
			return fmt.Errorf("encode %s %q: %w", out.Kind, out.Name, err)
		}
		b.Write(y)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// comment writes text as "# " lines of at most about 100 characters.
func comment(b *strings.Builder, text string) {
	line := "#"
	for _, word := range strings.Fields(text) {
		if len(line)+1+len(word) > 100 && line != "#" {
			b.WriteString(line + "\n")
			line = "#"
		}
		line += " " + word
	}
	b.WriteString(line + "\n")
}
