package offline

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"
)

func writeJSON(w io.Writer, out Output) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// writeYAML prints the verdict and explanation as comments above the pod, so
// the output stays a pod a person can read and kubectl can apply.
func writeYAML(w io.Writer, out Output, inventoryWarnings []string) error {
	var b strings.Builder
	verdict := "allowed"
	if !out.Allowed {
		verdict = "denied"
	}
	fmt.Fprintf(&b, "# gpuadmit: %s (%d patch operations)\n", verdict, len(out.Patch))
	comment(&b, out.Explanation) // it ends with the warnings
	for _, warn := range inventoryWarnings {
		comment(&b, "inventory: "+warn)
	}
	if out.Allowed {
		y, err := yaml.Marshal(out.Pod)
		if err != nil {
			return fmt.Errorf("encode pod: %w", err)
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
